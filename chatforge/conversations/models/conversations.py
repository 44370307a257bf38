"""What the user sees: conversations and their messages.

The assistant message of a run is written once, when the run ends, with the
final text and a compact record of its tool rounds (docs/architecture.md,
"A run, step by step"). The step rows in ``runs.py`` are the engine's
internal checkpoints.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class Conversation(models.Model):
    class Source(models.TextChoices):
        # Made by a person: the chat page, or the REST API on their behalf.
        CHAT = "chat"
        # Made by an OpenAI client through /v1: kept out of the chat page's
        # sidebar (one per request would bury the person's own chats).
        OPENAI = "openai"
        # A frontend's background task through /v1's "background-tasks"
        # model (titles, tags, follow-ups): listed only when asked for.
        TASK = "task"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations"
    )
    title = models.CharField(max_length=200, blank=True)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.CHAT)
    # The message the person last chose or sent: the current branch is the
    # path from the root to it, carried on down through each message's newest
    # child (docs/decisions/0037-message-tree.md). Not a foreign key: the
    # tree's rows and this pointer are written in either order, and a pointer
    # to a message since deleted only means "the newest branch".
    current_leaf = models.UUIDField(null=True, blank=True)
    # Pinned conversations come first in the list; archived ones leave it
    # (searchable, restorable). Times, not flags: the list sorts by them.
    pinned_at = models.DateTimeField(null=True, blank=True)
    archived_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [
            models.Index(fields=["user", "-updated_at"], name="conv_user_updated"),
            models.Index(fields=["user", "source", "-updated_at"], name="conv_user_source_updated"),
        ]

    def __str__(self) -> str:
        return self.title or str(self.id)


class Message(models.Model):
    class Role(models.TextChoices):
        SYSTEM = "system"
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"

    class Status(models.TextChoices):
        FINAL = "final"
        ERROR = "error"
        CANCELLED = "cancelled"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    # The run that produced this assistant message (null for user messages).
    run = models.ForeignKey(
        "conversations.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The message this one follows: messages form a tree, and an edit or a
    # regenerated answer is a sibling of what it replaces (decision 0037).
    # Null for the first message of a conversation (and its edits).
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    content_json = models.JSONField(null=True, blank=True)
    tool_calls = models.JSONField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=128, blank=True)
    # Compact history of the run's tool rounds: [{assistant_response,
    # tool_calls: [{id, name, arguments}], results: [{tool_call_id, name,
    # output, status, execution_time_ms}]}].
    tool_rounds = models.JSONField(default=list, blank=True)
    reasoning_details = models.JSONField(null=True, blank=True)
    reasoning_tokens = models.IntegerField(null=True, blank=True)
    response_id = models.CharField(max_length=200, blank=True)
    finish_reason = models.CharField(max_length=32, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.FINAL)
    model = models.CharField(max_length=200, blank=True)
    usage = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["conversation", "created_at"], name="msg_conv_created")]
        constraints = [
            # Exactly one assistant message per run, however often finalize runs.
            models.UniqueConstraint(
                fields=["run"],
                condition=models.Q(role="assistant"),
                name="one_assistant_message_per_run",
            )
        ]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:60]}"



class ConversationShare(models.Model):
    """A read-only snapshot of a conversation's current branch, viewable by
    anyone with its signed link until its owner revokes it.

    The snapshot is copied at share time (``snapshot``): what the owner says
    later, other branches, their settings and their other conversations are
    not reachable from the link."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="shares")
    # {title, messages: [{role, content, model, tool_rounds, created_at, ...}]}
    snapshot = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"share {self.id} of {self.conversation_id}"
