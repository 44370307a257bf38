"""Request and response shapes of the REST API."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chatforge.conversations.models import Conversation, Message, Run, ToolInvocation
from chatforge.conversations.selectors import MessageTree, run_assistants
from orchestration.services.approvals import pending_approvals
from orchestration.services.attachments import attachments_of

from .file_serializers import FileSerializer
from .lean_serializers import LeanSerializer


class ConversationSerializer(serializers.ModelSerializer):
    # Written as flags, read back as times (``chatforge.conversations.listing``).
    pinned = serializers.BooleanField(write_only=True, required=False,
                                      help_text="Pin (true) or unpin (false); `pinned_at` says when.")
    archived = serializers.BooleanField(write_only=True, required=False,
                                        help_text="Archive (true) or restore (false); `archived_at` says when.")

    class Meta:
        model = Conversation
        fields = ["id", "title", "source", "pinned_at", "archived_at", "created_at", "updated_at",
                  "pinned", "archived", "current_leaf"]
        read_only_fields = ["id", "source", "pinned_at", "archived_at", "created_at", "updated_at",
                            "current_leaf"]


def message_context(tree: MessageTree, page: Sequence[Message]) -> dict[str, Any]:
    """``MessageSerializer``'s context for ``page``, messages of ``tree``:
    their files, their versions and their runs' assistants, each read once
    for the page (``attachments_of``, ``run_assistants``)."""
    return {"attachments": attachments_of(page), "sibling_ids": tree.sibling_ids(),
            "assistants": run_assistants(page)}


class MessageSerializer(serializers.ModelSerializer):
    """A message; ``attachments`` come from the context's ``attachments``
    (message id -> files, ``attachments_of``), ``sibling_ids`` and
    ``assistant`` from ``message_context``'s, read once for a page."""

    attachments = serializers.SerializerMethodField()
    parent_id = serializers.UUIDField(read_only=True, allow_null=True,
                                      help_text="The message this one follows (null for a first message).")
    sibling_ids = serializers.SerializerMethodField(
        help_text="The versions of this message, oldest first, itself included: the messages with the same "
        "parent and role (an edit's or a regenerated answer's siblings). One id when there is no other.")
    assistant = serializers.SerializerMethodField(
        help_text="The assistant profile the run of this answer used; empty for user messages and for runs "
        "without one.")

    class Meta:
        model = Message
        fields = [
            "id",
            "role",
            "content",
            "attachments",
            "tool_rounds",
            "status",
            "finish_reason",
            "model",
            "usage",
            "run",
            "parent_id",
            "sibling_ids",
            "assistant",
            "created_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.ListField(child=serializers.UUIDField()))
    def get_sibling_ids(self, message: Message) -> list[str]:
        return [str(pk) for pk in self.context.get("sibling_ids", {}).get(message.pk, [message.pk])]

    def get_assistant(self, message: Message) -> str:
        return self.context.get("assistants", {}).get(message.pk, "")

    @extend_schema_field(FileSerializer(many=True))
    def get_attachments(self, message: Message) -> list[dict]:
        files = self.context.get("attachments", {}).get(message.pk, ())
        return FileSerializer(files, many=True).data if files else []


class RunOptionsSerializer(LeanSerializer):
    """The run options a request may set, shared by posting a message and
    answering one again."""

    model = serializers.CharField(required=False, allow_blank=True, max_length=200)
    tools = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, allow_null=True, max_length=128
    )
    assistant = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=100,
        help_text="An assistant profile's name: its system prompt, model, tools and iteration cap become the defaults.",
    )
    reasoning_effort = serializers.ChoiceField(
        choices=["minimal", "low", "medium", "high"], required=False
    )
    max_iterations = serializers.IntegerField(
        required=False, min_value=0, max_value=settings.CHATFORGE_MAX_ITERATIONS_LIMIT
    )


class MessageCreateSerializer(RunOptionsSerializer):
    # Blank only with attachments (the run's start says so otherwise).
    content = serializers.CharField(trim_whitespace=False, allow_blank=True)
    attachments = serializers.ListField(
        child=serializers.UUIDField(), required=False, max_length=100,
        help_text="Ids of your files (POST /api/files/) this message carries: images go to the model as "
        "images, documents as their text (docs/files.md). At most CHATFORGE_MAX_FILES_PER_MESSAGE.",
    )
    on_active = serializers.ChoiceField(
        choices=["reject", "enqueue", "interrupt"],
        default="reject",
        help_text="If the conversation has a run in progress: reject (409), enqueue (start after it) "
        "or interrupt (cancel it, then start).",
    )
    parent_id = serializers.UUIDField(
        required=False,
        allow_null=True,
        help_text="The message this one follows (messages form a tree: docs/api.md, Versions). Left out: the "
        "end of the conversation's current branch. To edit a message, send the edited message's parent_id "
        "(null for the first message): the new message becomes its sibling, and nothing is deleted. Refused "
        "(409) while the conversation has a run in progress.",
    )
    replace_from = serializers.UUIDField(
        required=False,
        help_text="Edit, the older way: the id of one of the conversation's user messages. The new message "
        "becomes its sibling (it gets that message's parent); nothing is deleted, and the earlier version "
        "stays readable (GET messages?tree=1). To answer a message again without a new one, use POST "
        "/api/messages/{id}/regenerate/. Refused (409) while the conversation has a run in progress.",
    )


class RegenerateSerializer(RunOptionsSerializer):
    """What may change when a message is answered again; the rest takes the
    same defaults as posting a message."""


class BranchSerializer(serializers.Serializer):
    message_id = serializers.UUIDField(help_text="A message of the conversation: the branch through it becomes "
                                                 "the current one.")


class BranchResultSerializer(serializers.Serializer):
    current_leaf = serializers.UUIDField()
    messages = MessageSerializer(many=True, help_text="The new current branch, in order.")


class RunAcceptedSerializer(serializers.Serializer):
    conversation_id = serializers.UUIDField()
    message_id = serializers.UUIDField()
    run_id = serializers.UUIDField()
    status = serializers.CharField()
    events_ws = serializers.CharField()
    events_sse = serializers.CharField()


def visible_run_options(options: dict, *, viewer_is_staff: bool) -> dict:
    """A run's options as its viewer may see them.

    A system prompt that came from an assistant profile is the operator's
    configuration (it may hold instructions users are not meant to read):
    staff see it, other users the assistant's name only. A system prompt
    without an assistant would be the owner's own, sent with the request, so
    it stays (a run is only ever shown to its owner).
    """
    if viewer_is_staff or "assistant" not in options:
        return options
    return {key: value for key, value in options.items() if key != "system_prompt"}


class ApprovalSerializer(serializers.ModelSerializer):
    """A tool call's approval state: what was asked, and who decided what, when."""

    decision = serializers.CharField(source="approval_decision", read_only=True)
    reason = serializers.CharField(source="approval_reason", read_only=True)
    decided_by = serializers.SerializerMethodField()
    decided_at = serializers.DateTimeField(source="approval_decided_at", read_only=True)
    expires_at = serializers.DateTimeField(source="approval_expires_at", read_only=True)

    class Meta:
        model = ToolInvocation
        fields = ["tool_call_id", "name", "arguments", "status", "expires_at", "decision", "reason",
                  "decided_by", "decided_at"]
        read_only_fields = fields

    def get_decided_by(self, inv: ToolInvocation) -> str | None:
        return inv.approval_decided_by.get_username() if inv.approval_decided_by_id else None


class ToolCallDecisionSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=["approve", "deny"])
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")


class RunSerializer(serializers.ModelSerializer):
    conversation_id = serializers.UUIDField(read_only=True)
    message_id = serializers.SerializerMethodField()
    pending_approvals = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = [
            "id",
            "conversation_id",
            "status",
            "model",
            "iteration",
            "options",
            "cancel_requested",
            "error",
            "finish_reason",
            "max_iterations_reached",
            "usage",
            "message_id",
            "pending_approvals",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields

    def to_representation(self, run: Run) -> dict:
        data = super().to_representation(run)
        request = self.context.get("request")
        data["options"] = visible_run_options(data.get("options") or {}, viewer_is_staff=bool(
            request is not None and getattr(request.user, "is_staff", False)))
        return data

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_pending_approvals(self, run: Run) -> list[dict]:
        """Calls waiting for the owner's decision (none once the run has ended)."""
        return pending_approvals(run)

    def get_message_id(self, run: Run) -> str | None:
        message = Message.objects.filter(run=run, role=Message.Role.ASSISTANT).only("id").first()
        return str(message.id) if message else None
