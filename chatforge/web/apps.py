from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "chatforge.web"
    label = "web"
    verbose_name = "Web pages"
