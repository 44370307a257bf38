"""The conversation list: its order, the archive, and pinning.

Pinned conversations come first (the newest pin first), then the rest by
their last change. Archived conversations leave the list but not the
account: they are listed on their own, found by a search, and restored by
clearing the time. Pin and archive are times, not flags, so the list sorts
by them; setting either does not touch ``updated_at`` (pinning an old
conversation must not make it look recently used, and restoring it puts it
back where it was).
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import F, QuerySet
from django.utils import timezone

from .models import Conversation
from .selectors import conversations_of


def conversation_list(
    user: AbstractBaseUser, *, source: str | None = None, search: str | None = None, archived: bool = False,
) -> QuerySet[Conversation]:
    """The user's conversations in list order: without ``search``, only the
    archived ones (``archived``) or only the others; a search covers both
    (each result's ``archived_at`` says which it is)."""
    conversations = conversations_of(user, source=source, search=search)
    if not search:
        conversations = conversations.filter(archived_at__isnull=not archived)
    return conversations.order_by(F("pinned_at").desc(nulls_last=True), "-updated_at", "-id")


def conversation_set_pinned(*, conversation: Conversation, pinned: bool) -> Conversation:
    """Pin (now, so it goes to the top of the pinned ones) or unpin. Pinning
    a pinned conversation again keeps its place."""
    if pinned == (conversation.pinned_at is not None):
        return conversation
    conversation.pinned_at = timezone.now() if pinned else None
    Conversation.objects.filter(pk=conversation.pk).update(pinned_at=conversation.pinned_at)
    return conversation


def conversation_set_archived(*, conversation: Conversation, archived: bool) -> Conversation:
    """Archive or restore. A run still going in an archived conversation
    goes on (archiving is about the list, not the conversation); its pin is
    kept, so a restored conversation comes back where it was."""
    if archived == (conversation.archived_at is not None):
        return conversation
    conversation.archived_at = timezone.now() if archived else None
    Conversation.objects.filter(pk=conversation.pk).update(archived_at=conversation.archived_at)
    return conversation
