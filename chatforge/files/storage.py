"""The files storage, as Django's storage API gives it (settings/files.py)."""

from __future__ import annotations

from django.core.files.storage import Storage, storages


def file_storage() -> Storage:
    return storages["chatforge_files"]
