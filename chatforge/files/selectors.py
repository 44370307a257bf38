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


def parse_file_id(file_id: Any) -> uuid.UUID | None:
    """A file's id as a UUID, or None for anything that cannot be one (such
    an id names no file: it is not found, never an error of its own)."""
    if isinstance(file_id, uuid.UUID):
        return file_id
    try:
        return uuid.UUID(str(file_id))
    except (ValueError, TypeError, AttributeError):
        return None


def file_of(user: AbstractBaseUser, file_id: Any) -> StoredFile | None:
    """The user's file with this id, or None: for another user's file, a
    missing one and an id that is no UUID alike."""
    key = parse_file_id(file_id)
    return StoredFile.objects.filter(user=user, pk=key).first() if key is not None else None


def conversation_files(conversation: Conversation) -> QuerySet[StoredFile]:
    """A conversation's files (uploaded to it, attached in it, made by its
    tools), in the order they arrived. The caller has checked the
    conversation is the user's."""
    return StoredFile.objects.filter(conversation=conversation).order_by("created_at", "id")
