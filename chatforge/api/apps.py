from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "chatforge.api"
    label = "api"

    def ready(self) -> None:
        from . import schema  # noqa: F401  (registers the Bearer scheme with drf-spectacular)
