from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    name = "chatforge.runtime"
    label = "runtime"
