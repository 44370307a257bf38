"""Request and response shapes of the REST API."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chatforge.conversations.models import Conversation, Message, Run, ToolInvocation
from orchestration.services.approvals import pending_approvals

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
                  "pinned", "archived"]
        read_only_fields = ["id", "source", "pinned_at", "archived_at", "created_at", "updated_at"]


class MessageSerializer(serializers.ModelSerializer):
    """A message; ``attachments`` come from the context's ``attachments``
    (message id -> files, ``attachments_of``), read once for a page."""

    attachments = serializers.SerializerMethodField()

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
            "created_at",
        ]
        read_only_fields = fields

    @extend_schema_field(FileSerializer(many=True))
    def get_attachments(self, message: Message) -> list[dict]:
        files = self.context.get("attachments", {}).get(message.pk, ())
        return FileSerializer(files, many=True).data if files else []


class MessageCreateSerializer(LeanSerializer):
    # Blank only with attachments (the run's start says so otherwise).
    content = serializers.CharField(trim_whitespace=False, allow_blank=True)
    attachments = serializers.ListField(
        child=serializers.UUIDField(), required=False, max_length=100,
        help_text="Ids of your files (POST /api/files/) this message carries: images go to the model as "
        "images, documents as their text (docs/files.md). At most CHATFORGE_MAX_FILES_PER_MESSAGE.",
    )
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
    on_active = serializers.ChoiceField(
        choices=["reject", "enqueue", "interrupt"],
        default="reject",
        help_text="If the conversation has a run in progress: reject (409), enqueue (start after it) "
        "or interrupt (cancel it, then start).",
    )
    replace_from = serializers.UUIDField(
        required=False,
        help_text="Edit or regenerate: the id of one of the conversation's user messages. It and every "
        "message after it are removed (with their runs), then this message is sent in its place. "
        "Regenerate the last answer by sending the last user message's id and text. Refused (409) while "
        "the conversation has a run in progress.",
    )


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
