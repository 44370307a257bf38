"""Stored files made directly (row and bytes), for tests of what uses files
rather than of the upload itself."""

from __future__ import annotations

import base64
import hashlib
import uuid

from django.core.files.base import ContentFile

from chatforge.files.models import StoredFile
from chatforge.files.storage import file_storage

# A 1x1 transparent PNG.
PNG_BYTES = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="
)


def stored_file(user, *, name: str = "notes.txt", data: bytes = b"Some notes.", kind: str = "document",
                content_type: str = "text/plain", text_status: str = "ready", text: str | None = None,
                conversation=None, text_error: str = "") -> StoredFile:
    file_id = uuid.uuid4()
    storage_name = file_storage().save(f"tests/{user.pk}/{file_id}", ContentFile(data))
    return StoredFile.objects.create(
        id=file_id, user=user, conversation=conversation, name=name, content_type=content_type, kind=kind,
        size=len(data), sha256=hashlib.sha256(data).hexdigest(), storage_name=storage_name,
        text_status=text_status if kind == "document" else "none",
        text=(data.decode() if text is None and kind == "document" and text_status == "ready" else text or ""),
        text_error=text_error,
    )


def image_file(user, **kwargs) -> StoredFile:
    return stored_file(user, name=kwargs.pop("name", "pixel.png"), data=PNG_BYTES, kind="image",
                       content_type="image/png", **kwargs)
