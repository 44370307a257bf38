"""REST views: check input, call one service or selector, serialize.

Every query is scoped to the requesting user, so another user's conversation
or run is simply not found (404), never "forbidden" (which would confirm it
exists).
"""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from chatforge.conversations import selectors
from chatforge.conversations.listing import conversation_list, conversation_set_archived, conversation_set_pinned
from chatforge.conversations.models import Conversation, Message, Run
from orchestration.services.approvals import decide
from orchestration.services.branches import delete_message, regenerate, switch_branch
from orchestration.services.conversations import conversation_delete
from orchestration.services.runs import (
    END_OF_BRANCH,
    OnActive,
    RunOptions,
    check_idempotency_key,
    run_request_cancel,
    run_start,
)

from . import schema
from .serializers import (
    ApprovalSerializer,
    BranchResultSerializer,
    BranchSerializer,
    ConversationSerializer,
    MessageCreateSerializer,
    MessageSerializer,
    RegenerateSerializer,
    RunAcceptedSerializer,
    RunSerializer,
    ToolCallDecisionSerializer,
    message_context,
)
from .share_views import ConversationSharingMixin
from .throttles import MessagePostThrottle


def _event_urls(request: Request, run_id: str) -> dict[str, str]:
    scheme = "wss" if request.is_secure() else "ws"
    host = request.get_host()
    return {
        "events_ws": f"{scheme}://{host}/ws/runs/{run_id}/",
        "events_sse": request.build_absolute_uri(f"/api/runs/{run_id}/events/"),
    }


def _accepted(request: Request, run: Run) -> Response:
    """The 202 of a run started (a message posted, or answered again)."""
    body = {
        "conversation_id": str(run.conversation_id),
        "message_id": str(run.user_message_id),
        "run_id": str(run.id),
        "status": run.status,
        **_event_urls(request, str(run.id)),
    }
    # ``body`` has RunAcceptedSerializer's shape (the schema's): passing
    # it through that serializer would only copy it, for 0.2 ms.
    response = Response(body, status=status.HTTP_202_ACCEPTED)
    if run.replayed:
        # A repeat of an earlier request (same Idempotency-Key): its run, not a new one.
        response["Idempotent-Replayed"] = "true"
    return response


def _run_options(data: dict) -> RunOptions:
    return RunOptions(
        model=data.get("model") or "",
        tools=data.get("tools"),
        max_iterations=data.get("max_iterations"),
        reasoning_effort=data.get("reasoning_effort"),
        assistant=data.get("assistant") or "",
    )


@extend_schema_view(
    list=extend_schema(examples=[schema.CONVERSATION],
                       parameters=[schema.CONVERSATION_SOURCE, schema.CONVERSATION_SEARCH,
                                   schema.CONVERSATION_ARCHIVED]),
    update=extend_schema(examples=[schema.CONVERSATION_RENAME, schema.CONVERSATION_PIN, schema.CONVERSATION_ARCHIVE,
                                   schema.CONVERSATION, schema.NOT_FOUND]),
    partial_update=extend_schema(examples=[schema.CONVERSATION_RENAME, schema.CONVERSATION_PIN,
                                           schema.CONVERSATION_ARCHIVE, schema.CONVERSATION, schema.NOT_FOUND]),
    create=extend_schema(examples=[schema.CONVERSATION_CREATE, schema.CONVERSATION]),
    retrieve=extend_schema(examples=[schema.CONVERSATION, schema.NOT_FOUND]),
    destroy=extend_schema(responses={204: None, 404: dict}, examples=[schema.NOT_FOUND]),
)
class ConversationViewSet(
    ConversationSharingMixin,
    mixins.CreateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Conversations: list (pinned first; ``?source=``, ``?q=`` search,
    ``?archived=1``), create, read, rename, pin and archive (``PATCH
    {"title", "pinned", "archived"}``), delete (cancels its active runs),
    export and share (``share_views.py``)."""

    serializer_class = ConversationSerializer

    def get_queryset(self):
        listing = self.action == "list"
        source = self.request.query_params.get("source") if listing else None
        if source is not None and source not in Conversation.Source.values:
            raise ValidationError({"source": [f"Use one of: {', '.join(Conversation.Source.values)}."]})
        search = self.request.query_params.get("q", "").strip() if listing else ""
        if "\x00" in search:
            raise ValidationError({"q": ["The search text cannot contain NUL characters."]})
        if listing:
            archived = self.request.query_params.get("archived", "0")
            if archived not in ("0", "1", "true", "false"):
                raise ValidationError({"archived": ["Use 1 (only archived conversations) or 0 (the others)."]})
            conversations = conversation_list(self.request.user, source=source, search=search or None,
                                              archived=archived in ("1", "true"))
        else:
            conversations = selectors.conversations_of(self.request.user)
        if listing and source is None:
            # A frontend's background tasks (/v1 "background-tasks") only when asked for.
            conversations = conversations.exclude(source=Conversation.Source.TASK)
        return conversations

    def get_object(self) -> Conversation:
        """The user's conversation named by the URL (404 otherwise), read
        with one fixed statement: posting a message starts here."""
        conversation = selectors.conversation_of(self.request.user, self.kwargs["pk"])
        if conversation is None:
            raise Http404(f"No {Conversation._meta.object_name} matches the given query.")
        self.check_object_permissions(self.request, conversation)
        return conversation

    def perform_create(self, serializer: ConversationSerializer) -> None:
        flags = _list_flags(serializer)
        serializer.instance = _apply_list_flags(serializer.save(user=self.request.user), flags)

    def perform_update(self, serializer: ConversationSerializer) -> None:
        flags = _list_flags(serializer)
        if serializer.validated_data:  # a rename; pinning or archiving alone leaves updated_at as it was
            serializer.save()
        serializer.instance = _apply_list_flags(serializer.instance, flags)

    @extend_schema(methods=["get"], responses=MessageSerializer(many=True), parameters=[schema.MESSAGES_TREE],
                   examples=[schema.ASSISTANT_MESSAGE])
    @extend_schema(
        methods=["post"],
        request=MessageCreateSerializer,
        parameters=[schema.IDEMPOTENCY_KEY],
        responses={202: RunAcceptedSerializer, 400: dict, 409: dict, 422: dict, 429: dict},
        examples=[schema.MESSAGE_REQUEST, schema.MESSAGE_EDIT, schema.RUN_ACCEPTED, schema.RUN_ACTIVE_ERROR, schema.UNKNOWN_TOOL_ERROR,
                  schema.IDEMPOTENCY_KEY_REUSED],
    )
    @action(detail=True, methods=["get", "post"], url_path="messages", throttle_classes=[MessagePostThrottle])
    def messages(self, request: Request, pk: str | None = None) -> Response:
        conversation: Conversation = self.get_object()
        if request.method == "GET":
            tree = selectors.message_tree_of(conversation)
            whole = request.query_params.get("tree", "") in ("1", "true")
            page = self.paginate_queryset(tree.messages if whole else tree.current_branch())
            context = message_context(tree, page)
            return self.get_paginated_response(MessageSerializer(page, many=True, context=context).data)
        payload = MessageCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        idempotency_key = check_idempotency_key(request.headers.get("Idempotency-Key"))
        run = run_start(
            user=request.user,
            conversation=conversation,
            content=data["content"],
            options=_run_options(data),
            on_active=OnActive(data["on_active"]),
            idempotency_key=idempotency_key,
            parent_id=data["parent_id"] if "parent_id" in data else END_OF_BRANCH,
            replace_from=str(data["replace_from"]) if data.get("replace_from") else None,
            attachments=[str(i) for i in data.get("attachments") or ()],
        )
        return _accepted(request, run)

    @extend_schema(request=BranchSerializer,
                   responses={200: BranchResultSerializer, 400: dict, 404: dict, 409: dict},
                   examples=[schema.BRANCH_REQUEST, schema.BRANCH_RESULT, schema.BRANCH_RUN_ACTIVE,
                             schema.NOT_FOUND])
    @action(detail=True, methods=["post"], url_path="branch")
    def branch(self, request: Request, pk: str | None = None) -> Response:
        """Make the branch through a message the current one (switch to
        another version); answers with that branch."""
        conversation: Conversation = self.get_object()
        body = BranchSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        leaf = switch_branch(conversation=conversation, message_id=body.validated_data["message_id"])
        tree = selectors.message_tree_of(conversation)
        branch = tree.current_branch()
        return Response({"current_leaf": str(leaf),
                         "messages": MessageSerializer(branch, many=True, context=message_context(tree, branch)).data})

    def perform_destroy(self, instance: Conversation) -> None:
        conversation_delete(conversation=instance)


def _list_flags(serializer: ConversationSerializer) -> dict[str, bool]:
    """The write-only ``pinned`` / ``archived`` of a request, taken out of
    what the serializer saves on the row."""
    return {name: serializer.validated_data.pop(name) for name in ("pinned", "archived")
            if name in serializer.validated_data}


def _apply_list_flags(conversation: Conversation, flags: dict[str, bool]) -> Conversation:
    if "pinned" in flags:
        conversation = conversation_set_pinned(conversation=conversation, pinned=flags["pinned"])
    if "archived" in flags:
        conversation = conversation_set_archived(conversation=conversation, archived=flags["archived"])
    return conversation


@extend_schema_view(retrieve=extend_schema(responses={200: RunSerializer, 404: dict},
                                           examples=[schema.RUN, schema.NOT_FOUND]))
class RunViewSet(mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = RunSerializer

    def get_queryset(self):
        return selectors.runs_of(self.request.user)

    @extend_schema(request=None, responses={202: RunSerializer, 404: dict}, examples=[schema.RUN, schema.NOT_FOUND])
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        run = run_request_cancel(run=self.get_object())
        return Response(RunSerializer(run, context=self.get_serializer_context()).data,
                        status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=ToolCallDecisionSerializer,
                   responses={200: ApprovalSerializer, 400: dict, 404: dict, 409: dict},
                   examples=[schema.DECISION_REQUEST, schema.DECISION_APPROVED, schema.DECISION_CONFLICT,
                             schema.NOT_FOUND])
    @action(detail=True, methods=["post"], url_path=r"tool-calls/(?P<tool_call_id>[^/]+)/decision")
    def decision(self, request: Request, pk: str | None = None, tool_call_id: str = "") -> Response:
        """Approve or deny a tool call that awaits approval (the run's owner).
        The same decision again is a no-op; a different one is a 409."""
        run = self.get_object()
        body = ToolCallDecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        inv = decide(run_id=str(run.pk), tool_call_id=tool_call_id, user=request.user,
                     decision=body.validated_data["decision"], reason=body.validated_data["reason"])
        return Response(ApprovalSerializer(inv).data)


@extend_schema_view(destroy=extend_schema(responses={204: None, 404: dict, 409: dict},
                                          examples=[schema.DELETE_RUN_ACTIVE, schema.NOT_FOUND]))
class MessageViewSet(mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """One message of the user's: delete it with the branch below it, or
    answer it again (regenerate)."""

    serializer_class = MessageSerializer

    def get_queryset(self):
        return Message.objects.filter(conversation__user=self.request.user)

    def get_object(self) -> Message:
        message = selectors.message_of(self.request.user, self.kwargs["pk"])
        if message is None:
            raise Http404(f"No {Message._meta.object_name} matches the given query.")
        return message

    def perform_destroy(self, instance: Message) -> None:
        delete_message(message=instance)

    @extend_schema(
        request=RegenerateSerializer,
        parameters=[schema.IDEMPOTENCY_KEY],
        responses={202: RunAcceptedSerializer, 400: dict, 404: dict, 409: dict, 422: dict, 429: dict},
        examples=[schema.REGENERATE_REQUEST, schema.REGENERATE_ACCEPTED, schema.REGENERATE_RUN_ACTIVE,
                  schema.NOT_FOUND],
    )
    @action(detail=True, methods=["post"], throttle_classes=[MessagePostThrottle])
    def regenerate(self, request: Request, pk: str | None = None) -> Response:
        """Answer a user message again (or the question an assistant
        message answered): a new run, no new message; the new answer is a
        sibling of the earlier ones."""
        message = self.get_object()
        payload = RegenerateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        run = regenerate(user=request.user, message=message, options=_run_options(payload.validated_data),
                         idempotency_key=check_idempotency_key(request.headers.get("Idempotency-Key")))
        return _accepted(request, run)
