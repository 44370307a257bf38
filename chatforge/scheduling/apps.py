from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "chatforge.scheduling"
    label = "scheduling"
    verbose_name = "Fair scheduling and quotas"
