from django.apps import AppConfig


class LlmConfig(AppConfig):
    name = "chatforge.llm"
    label = "llm"
    verbose_name = "Providers and models"
