from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "chatforge.api"
    label = "api"
