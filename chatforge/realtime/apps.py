from django.apps import AppConfig


class RealtimeConfig(AppConfig):
    name = "chatforge.realtime"
    label = "realtime"
