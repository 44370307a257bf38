"""A stored file's row: who owns it, where it belongs, what it is, and the
text read from it. The bytes live in the files storage
(``STORAGES["chatforge_files"]``: a local directory or an S3-compatible
bucket), under ``storage_name``; docs/files.md.

A file belongs to one user and, once attached or made by a tool, to one
conversation: deleting either deletes the file (its bytes after the
transaction commits, ``signals.py``).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class StoredFile(models.Model):
    class Kind(models.TextChoices):
        # Given to models that take images as an image part.
        IMAGE = "image"
        # Read to text once (a task on the tools worker), given to models as text.
        DOCUMENT = "document"

    class Source(models.TextChoices):
        UPLOAD = "upload"  # POST /api/files/, or a /v1 content part
        TOOL = "tool"  # returned by a tool call

    class TextStatus(models.TextChoices):
        NONE = "none"  # images: nothing to read
        PENDING = "pending"  # a document whose text is being read
        READY = "ready"
        FAILED = "failed"  # unreadable (corrupt, encrypted, too large): text_error says why

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="files")
    conversation = models.ForeignKey(
        "conversations.Conversation", null=True, blank=True, on_delete=models.CASCADE, related_name="files"
    )
    # The user message the file is attached to (null until attached, and for
    # files tools made). An edit that deletes the message keeps the file.
    message = models.ForeignKey(
        "conversations.Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="files"
    )
    # The tool call that returned it (source=tool).
    run = models.ForeignKey(
        "conversations.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    tool_call_id = models.CharField(max_length=128, blank=True)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.UPLOAD)
    # A display name made safe (no path, no control or bidi characters,
    # bounded length): never used as a path, quoted in downloads.
    name = models.CharField(max_length=255)
    # Sniffed from the bytes, never taken from the name or the client.
    content_type = models.CharField(max_length=100)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    size = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    # The key in the files storage; made by us, never from the name.
    storage_name = models.CharField(max_length=300, unique=True)
    text_status = models.CharField(max_length=16, choices=TextStatus.choices, default=TextStatus.NONE)
    # The document's text as read (bounded by CHATFORGE_FILE_TEXT_MAX_CHARS;
    # text_truncated says it was cut there).
    text = models.TextField(blank=True)
    text_truncated = models.BooleanField(default=False)
    text_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["user", "-created_at"], name="file_user_created"),
            models.Index(fields=["conversation", "created_at"], name="file_conv_created"),
            models.Index(fields=["message"], name="file_message"),
            # A document's text already read from the same bytes (services._text_from_twin).
            models.Index(fields=["user", "sha256"], name="file_user_sha256"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.size} bytes)"


class FileQuota(models.Model):
    """A user's own limit on stored bytes (the admin's; without a row,
    CHATFORGE_USER_FILE_BYTES applies)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="file_quota")
    max_bytes = models.BigIntegerField(help_text="Bytes this user may keep stored, all files together.")

    class Meta:
        verbose_name = "file quota"

    def __str__(self) -> str:
        return f"{self.user}: {self.max_bytes} bytes"
