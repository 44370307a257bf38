"""Reads, always scoped to the user who asks."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from .models import Conversation, Message, Run


def conversations_of(user: AbstractBaseUser) -> QuerySet[Conversation]:
    return Conversation.objects.filter(user=user)


def messages_of(conversation: Conversation) -> QuerySet[Message]:
    return conversation.messages.filter(role__in=[Message.Role.USER, Message.Role.ASSISTANT]).order_by(
        "created_at", "id"
    )


def runs_of(user: AbstractBaseUser) -> QuerySet[Run]:
    return Run.objects.filter(user=user)


def run_of(user: AbstractBaseUser, run_id: str) -> Run | None:
    """The user's run with this id, or None (also for malformed ids)."""
    try:
        return runs_of(user).filter(pk=run_id).first()
    except (ValueError, ValidationError):  # a malformed id is "not found", not a server error
        return None
