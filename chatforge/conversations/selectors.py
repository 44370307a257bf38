"""Reads, always scoped to the user who asks."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q, QuerySet

from .models import Conversation, Message, Run


def conversations_of(
    user: AbstractBaseUser, *, source: str | None = None, search: str | None = None
) -> QuerySet[Conversation]:
    """The user's conversations; only those of one ``Conversation.Source``,
    and only those whose title or any message contains ``search``
    (case-insensitive substring: what people expect of a sidebar search),
    if given."""
    conversations = Conversation.objects.filter(user=user)
    if source is not None:
        conversations = conversations.filter(source=source)
    if search:
        matching = Message.objects.filter(conversation_id=models.OuterRef("pk"), content__icontains=search)
        conversations = conversations.filter(Q(title__icontains=search) | Q(models.Exists(matching)))
    return conversations


def _position(message: Message) -> tuple:
    """Where a message belongs in the conversation: an assistant message
    right after the user message of its run, whenever it was written (with
    double-texting, a later user message can be stored before the previous
    run's answer)."""
    if message.role == Message.Role.ASSISTANT and message.run_id and message.run.user_message_id:
        return (message.run.user_message.created_at, 1, message.created_at)
    return (message.created_at, 0, message.created_at)


def ordered_messages(conversation_id, *, before: Message | None = None, roles=None) -> list[Message]:
    """The conversation's messages in conversation order; with ``before``,
    only those that come before that user message's answer."""
    messages = Message.objects.filter(conversation_id=conversation_id).select_related("run__user_message")
    if roles is not None:
        messages = messages.filter(role__in=roles)
    ordered = sorted(messages, key=_position)
    if before is not None:
        limit = (before.created_at, 1, before.created_at)
        ordered = [m for m in ordered if _position(m) < limit and not (m.run_id and m.run.user_message_id == before.id)]
    return ordered


def messages_of(conversation: Conversation) -> list[Message]:
    return ordered_messages(conversation.id, roles=[Message.Role.USER, Message.Role.ASSISTANT])


def runs_of(user: AbstractBaseUser) -> QuerySet[Run]:
    return Run.objects.filter(user=user)


def run_of(user: AbstractBaseUser, run_id: str) -> Run | None:
    """The user's run with this id, or None (also for malformed ids)."""
    try:
        return runs_of(user).filter(pk=run_id).first()
    except (ValueError, ValidationError):  # a malformed id is "not found", not a server error
        return None
