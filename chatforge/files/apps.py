from django.apps import AppConfig


class FilesConfig(AppConfig):
    name = "chatforge.files"
    label = "files"
    verbose_name = "Files"
