from django.apps import AppConfig


class McpConfig(AppConfig):
    name = "chatforge.mcp"
    label = "mcp"
    verbose_name = "MCP servers"

    def ready(self) -> None:
        """Register the discovery task with Celery: workers import only the
        modules the Celery app names, and this app's task is not one of them."""
        from . import tasks  # noqa: F401
