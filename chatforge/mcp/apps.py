from django.apps import AppConfig


class McpConfig(AppConfig):
    name = "chatforge.mcp"
    label = "mcp"
    verbose_name = "MCP servers"

    def ready(self) -> None:
        """Plug the servers' tools into the catalog, count every saved or
        deleted server row in the catalog's version (as the catalog does for
        its own rows), and register the discovery task with Celery: workers
        import only the modules the Celery app names, and this app's task is
        not one of them. (Imported here: models may not be imported before
        the app registry is ready.)"""
        from django.db.models.signals import post_delete, post_save

        from chatforge.catalog.sources import add_source
        from chatforge.catalog.versioning import bump_on_change

        from . import tasks  # noqa: F401
        from .catalog import MCP_SOURCE
        from .models import McpServer

        add_source(MCP_SOURCE)
        post_save.connect(bump_on_change, sender=McpServer, dispatch_uid="catalog-version-McpServer")
        post_delete.connect(bump_on_change, sender=McpServer, dispatch_uid="catalog-version-McpServer-del")
