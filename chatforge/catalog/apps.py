from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "chatforge.catalog"
    label = "catalog"
    verbose_name = "Tools and assistants"

    def ready(self) -> None:
        """Hand the tools package its settings (it never reads them itself),
        and count every saved or deleted tool row (versioning.py; MCP server rows
        are counted by their own app)."""
        from django.conf import settings
        from django.db.models.signals import post_delete, post_save

        from tools.builtin.web_search import configure_web_search
        from tools.executor import configure_output_limit, configure_payload_logging
        from tools.net import policy

        from .models import CodeToolLimits, ToolDefinition
        from .versioning import bump_on_change

        policy.configure(allowed_private_hosts=settings.CHATFORGE_TOOLS_ALLOWED_PRIVATE_HOSTS)
        configure_web_search(base_url=settings.TAVILY_BASE_URL, default_api_key=settings.TAVILY_API_KEY or None)
        configure_output_limit(settings.CHATFORGE_TOOL_OUTPUT_MAX_CHARS)
        configure_payload_logging(settings.CHATFORGE_LOG_TOOL_PAYLOADS)
        post_save.connect(bump_on_change, sender=ToolDefinition, dispatch_uid="catalog-version-ToolDefinition")
        post_delete.connect(bump_on_change, sender=ToolDefinition, dispatch_uid="catalog-version-ToolDefinition-del")
        post_save.connect(bump_on_change, sender=CodeToolLimits, dispatch_uid="catalog-version-CodeToolLimits")
        post_delete.connect(bump_on_change, sender=CodeToolLimits, dispatch_uid="catalog-version-CodeToolLimits-del")
