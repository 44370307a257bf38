"""A file's bytes go when its row goes, however the row goes: deleted
alone (``services.file_delete``, the admin), or by a cascade from its
conversation (``orchestration/services/conversations.py``) or its user.

Django sends ``post_delete`` for every row a cascade deletes (a model with a
receiver is never fast-deleted), so this one receiver covers them all. The
bytes are deleted once the deletion commits: a deletion rolled back keeps a
row whose bytes are still there.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from .models import StoredFile
from .services import delete_bytes


@receiver(post_delete, sender=StoredFile, dispatch_uid="chatforge.files.delete_bytes")
def delete_bytes_on_commit(sender: type[StoredFile], instance: StoredFile, using: str, **kwargs: Any) -> None:
    storage_name = instance.storage_name
    transaction.on_commit(lambda: delete_bytes(storage_name), using=using)
