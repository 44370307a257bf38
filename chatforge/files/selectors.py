"""Reads of files, always scoped to the user who asks: another user's file
is not found, exactly as a missing one is."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from chatforge.conversations.models import Conversation

from .models import StoredFile


def files_of(user: AbstractBaseUser) -> QuerySet[StoredFile]:
    """The user's files, newest first."""
    return StoredFile.objects.filter(user=user).order_by("-created_at", "-id")


def file_of(user: AbstractBaseUser, file_id: Any) -> StoredFile | None:
    """The user's file with this id, or None: for another user's file, a
    missing one and an id that is no UUID alike."""
    try:
        key = file_id if isinstance(file_id, uuid.UUID) else uuid.UUID(str(file_id))
    except (ValueError, TypeError, AttributeError):
        return None
    return StoredFile.objects.filter(user=user, pk=key).first()


def conversation_files(conversation: Conversation) -> QuerySet[StoredFile]:
    """A conversation's files (uploaded to it, attached in it, made by its
    tools), in the order they arrived. The caller has checked the
    conversation is the user's."""
    return StoredFile.objects.filter(conversation=conversation).order_by("created_at", "id")
