"""The limits on files: bytes per file and bytes per user (docs/files.md,
"Limits and bad input"). Files per message are the attachments' limit
(``orchestration/services/attachments.py``).

A user's quota holds under concurrent uploads: the check and the new row
are made under a lock on the user's row (``lock_user_files``), so two
uploads that each fit alone but not together cannot both pass. Postgres
takes ``FOR NO KEY UPDATE`` on the user (inserts that reference the user
take only ``FOR KEY SHARE``, which it does not block); SQLite has no row
locks, and its transactions are ``BEGIN IMMEDIATE`` (settings/database.py),
which already serialise every writer.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Sum

from chatforge.errors import FileQuotaExceeded, FileTooLarge, InvalidRequest

from .models import FileQuota, StoredFile


def max_file_bytes() -> int:
    return settings.CHATFORGE_MAX_FILE_BYTES


def human_size(size: int) -> str:
    """``1536`` → ``"1.5 KiB"``: sizes as people read them, in messages and the admin."""
    value = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def too_large(*, limit: int) -> FileTooLarge:
    exact = f" ({limit} bytes)" if limit >= 1024 else ""
    return FileTooLarge(
        f"The file is larger than the limit of {human_size(limit)}{exact} per file.",
        details={"limit_bytes": limit},
    )


def check_file_size(size: int) -> None:
    """A file is not empty and not over the per-file limit."""
    if size == 0:
        raise InvalidRequest("The file is empty (0 bytes); send a file with something in it.",
                             details={"size": 0})
    limit = max_file_bytes()
    if size > limit:
        raise too_large(limit=limit)


def quota_bytes(user: AbstractBaseUser) -> int:
    """The bytes the user may keep stored: the admin's quota, else CHATFORGE_USER_FILE_BYTES."""
    own = FileQuota.objects.filter(user=user).values_list("max_bytes", flat=True).first()
    return own if own is not None else settings.CHATFORGE_USER_FILE_BYTES


def bytes_used(user: AbstractBaseUser) -> int:
    return StoredFile.objects.filter(user=user).aggregate(total=Sum("size"))["total"] or 0


def lock_user_files(user: AbstractBaseUser) -> None:
    """Serialise the quota checks of one user's new files until the
    transaction ends (the caller's ``atomic`` block)."""
    list(get_user_model().objects.select_for_update(no_key=True).filter(pk=user.pk).values_list("pk"))


def check_quota(*, user: AbstractBaseUser, adding: int) -> None:
    """Refuse ``adding`` more bytes past the user's quota. The caller holds
    ``lock_user_files`` when it goes on to store the row."""
    allowed = quota_bytes(user)
    used = bytes_used(user)
    if used + adding > allowed:
        raise FileQuotaExceeded(
            f"Storing this file ({human_size(adding)}) would go past your file storage limit: "
            f"{human_size(used)} of {human_size(allowed)} is used. Delete files you no longer need, "
            "or ask the operator for more.",
            details={"used_bytes": used, "allowed_bytes": allowed, "file_bytes": adding},
        )
