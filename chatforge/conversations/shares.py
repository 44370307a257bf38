"""Sharing a conversation by link: a snapshot, behind a signed id.

A share copies the current branch when it is made (decision 0038): what the
owner writes later, the other branches, the conversation's settings and
everything else of theirs stay out of reach of the link. What is copied is
only what a reader needs: per message its role, text, model, time, its tool
rounds (each call's name, arguments, output and status) and the *names* of
its files — never their bytes, the system prompt, run options, usage, or who
the owner is.

The link's token is the share's id signed with the site's key
(``Signer(salt="chatforge.share")``): a changed token fails the signature
and is not found, and a revoked share's link answers "revoked" from then on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from django.core import signing
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.utils import timezone

from .models import Conversation, ConversationShare, Message

SALT = "chatforge.share"
SNAPSHOT_VERSION = 1


class NamedFile(Protocol):
    name: str


def _signer() -> signing.Signer:
    return signing.Signer(salt=SALT)


def share_token(share: ConversationShare) -> str:
    return _signer().sign(str(share.pk))


def share_path(share: ConversationShare) -> str:
    return f"/share/{share_token(share)}/"


def share_from_token(token: str) -> ConversationShare | None:
    """The share this token names (revoked or not), or None: a token whose
    signature does not hold, or a share deleted with its conversation."""
    try:
        share_id = _signer().unsign(token)
    except signing.BadSignature:
        return None
    try:
        return ConversationShare.objects.filter(pk=share_id).first()
    except (ValueError, ValidationError):
        return None


def _round(rnd: dict[str, Any]) -> dict[str, Any]:
    return {
        "assistant_response": rnd.get("assistant_response") or "",
        "tool_calls": [{"id": c.get("id", ""), "name": c.get("name", ""), "arguments": c.get("arguments", "")}
                       for c in rnd.get("tool_calls") or []],
        "results": [{"tool_call_id": r.get("tool_call_id", ""), "name": r.get("name", ""),
                     "output": r.get("output", ""), "status": r.get("status", "")}
                    for r in rnd.get("results") or []],
    }


def snapshot_of(
    *, conversation: Conversation, messages: Sequence[Message], attachments: Mapping[Any, Sequence[NamedFile]],
) -> dict[str, Any]:
    """What the link shows: the title and, per message, only the fields
    named in this module's docstring."""
    return {
        "version": SNAPSHOT_VERSION,
        "title": conversation.title,
        "messages": [
            {
                "role": m.role,
                "content": m.content,
                "status": m.status,
                "model": m.model,
                "created_at": m.created_at.isoformat().replace("+00:00", "Z"),
                "tool_rounds": [_round(rnd) for rnd in m.tool_rounds or []],
                "attachments": [{"name": f.name} for f in attachments.get(m.pk, ())],
            }
            for m in messages
            if m.role in (Message.Role.USER, Message.Role.ASSISTANT)
        ],
    }


def share_create(
    *, conversation: Conversation, messages: Sequence[Message], attachments: Mapping[Any, Sequence[NamedFile]],
) -> ConversationShare:
    return ConversationShare.objects.create(
        conversation=conversation,
        snapshot=snapshot_of(conversation=conversation, messages=messages, attachments=attachments),
    )


def shares_of(conversation: Conversation) -> QuerySet[ConversationShare]:
    """Every share of the conversation, newest first, revoked ones too."""
    return ConversationShare.objects.filter(conversation=conversation).order_by("-created_at", "-id")


def share_of(conversation: Conversation, share_id: str) -> ConversationShare | None:
    try:
        return shares_of(conversation).filter(pk=share_id).first()
    except (ValueError, ValidationError):
        return None


def share_revoke(*, share: ConversationShare) -> ConversationShare:
    """Ends the link for good (revoking again keeps the first time)."""
    if share.revoked_at is None:
        share.revoked_at = timezone.now()
        ConversationShare.objects.filter(pk=share.pk, revoked_at__isnull=True).update(revoked_at=share.revoked_at)
    return share
