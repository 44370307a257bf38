from django.apps import AppConfig


class AdminSiteConfig(AppConfig):
    name = "chatforge.adminsite"
    label = "adminsite"
    verbose_name = "Admin pages"
