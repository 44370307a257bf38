"""Files in a conversation: uploads and files tools made, their bytes in the
files storage, and the text read from documents (docs/files.md)."""
from django.apps import AppConfig


class FilesConfig(AppConfig):
    name = "chatforge.files"
    label = "files"
    verbose_name = "Files"

    def ready(self) -> None:
        # Deleting a row (alone or by a cascade) deletes its bytes on commit.
        from . import signals  # noqa: F401  (Django's app registry must be ready first)
