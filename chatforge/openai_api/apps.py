from django.apps import AppConfig


class OpenAIApiConfig(AppConfig):
    name = "chatforge.openai_api"
    label = "openai_api"
    verbose_name = "OpenAI-compatible API"
