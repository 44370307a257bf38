from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "chatforge.catalog"
    label = "catalog"
    verbose_name = "Tools and assistants"

    def ready(self) -> None:
        """Hand the tools package its settings (it never reads them itself)."""
        from django.conf import settings

        from tools.builtin.web_search import configure_web_search
        from tools.executor import configure_output_limit, configure_payload_logging
        from tools.net import policy

        policy.configure(allowed_private_hosts=settings.CHATFORGE_TOOLS_ALLOWED_PRIVATE_HOSTS)
        configure_web_search(base_url=settings.TAVILY_BASE_URL, default_api_key=settings.TAVILY_API_KEY or None)
        configure_output_limit(settings.CHATFORGE_TOOL_OUTPUT_MAX_CHARS)
        configure_payload_logging(settings.CHATFORGE_LOG_TOOL_PAYLOADS)
