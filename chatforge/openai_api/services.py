"""What the OpenAI-compatible views do in the database: start a chat's run
(new or continued conversation), read a round's tool calls and a run's end,
cancel, list models. Synchronous; the async views call them through
``sync_to_async``."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction

from chatforge.api.openai_errors import OpenAIError
from chatforge.api.throttles import MessagePostThrottle
from chatforge.conversations.models import Conversation, Message, Run, ToolInvocation
from chatforge.conversations.selectors import conversations_of, run_of
from chatforge.llm.models import LanguageModel
from chatforge.llm.resolution import DEMO_MODEL
from chatforge.files.models import StoredFile
from chatforge.files.services import file_create, file_delete
from chatforge.llm.image_support import image_refusal
from chatforge.llm.providers.images import content_parts
from chatforge.llm.providers.sampling import SUPPORTED
from chatforge.llm.routing import resolve_model
from chatforge.llm.validation import all_validation_statuses
from orchestration.services.runs import RunOptions, run_for_idempotency_key, run_request_cancel, run_start

from .background_tasks import answering_model, is_background_task, listed_model
from .client_tools import continued_rounds, split_tools
from .resent_history import conversation_for_history
from .translate import ChatRequest, FilePart, ToolCallOut

logger = logging.getLogger(__name__)

RUN_GONE = "The run no longer exists: its conversation was deleted."
_RUN_OPTION_FIELDS = frozenset(f.name for f in dataclasses.fields(RunOptions))


def check_message_rate(*, user: AbstractBaseUser, meta: dict[str, Any]) -> None:
    """The same per-user message budget as ``POST /api/conversations/{id}/messages/``:
    a chat completion posts a message."""
    throttle = MessagePostThrottle()
    if not throttle.allow_request(SimpleNamespace(method="POST", user=user, META=meta), None):
        wait = throttle.wait()
        seconds = max(1, int(wait)) if wait is not None else None
        raise OpenAIError(
            "Too many messages; wait " + (f"{seconds} s" if seconds else "a moment") + " and send again.",
            status=429,
            code="rate_limit_exceeded",
            headers={"Retry-After": str(seconds)} if seconds else {},
        )


def _background_task_options(request: ChatRequest) -> RunOptions:
    """One model turn, no tools of anyone's (background_tasks.py)."""
    sampling = {k: v for k, v in request.sampling.items() if k not in ("tool_choice", "parallel_tool_calls")}
    return RunOptions(model=answering_model(request.model), tools=[], max_iterations=0,
                      reasoning_effort=request.reasoning_effort, assistant=request.assistant,
                      sampling=sampling or None, temperature=request.temperature,
                      max_tokens=request.max_tokens, can_ask_approval=False)


def _run_options(request: ChatRequest) -> RunOptions:
    if is_background_task(request.model):
        return _background_task_options(request)
    tools, client_tools = split_tools(request.tools, request.tool_specs)
    if tools is None and not request.assistant and settings.CHATFORGE_OPENAI_DEFAULT_TOOLS is not None:
        # The client's own tools shadow defaults of the same name (split_tools).
        shadowed = {spec["function"]["name"] for spec in client_tools}
        tools = [name for name in settings.CHATFORGE_OPENAI_DEFAULT_TOOLS if name not in shadowed]
    options: dict[str, Any] = {
        "model": request.model,
        "tools": tools,
        "reasoning_effort": request.reasoning_effort,
        "assistant": request.assistant,
        "sampling": request.sampling or None,
        "client_tools": client_tools or None,
        # No one can approve a call here: CHATFORGE_V1_APPROVAL decides (approval_policy.py).
        "can_ask_approval": False,
    }
    if tools == [] and not client_tools:
        options["max_iterations"] = 0  # tool_choice "none": the model is offered no tools at all
    # The sampling options reach the provider once the engine's RunOptions
    # carries them; until then they are accepted and not applied.
    for name in ("temperature", "max_tokens"):
        value = getattr(request, name)
        if value is None:
            continue
        if name in _RUN_OPTION_FIELDS:
            options[name] = value
        else:
            logger.info("openai api: '%s' accepted but not applied (the engine does not carry it yet)", name)
    return RunOptions(**options)


def _conversation(user: AbstractBaseUser, conversation_id: str) -> Conversation:
    try:
        conversation = conversations_of(user).filter(pk=conversation_id).first()
    except (ValueError, ValidationError):
        conversation = None
    if conversation is None:
        raise OpenAIError(
            f"No conversation '{conversation_id}' of yours: leave 'conversation_id' out to start a new "
            "one, or use an id from an earlier response's 'conversation_id'.",
            status=404,
            param="conversation_id",
            code="conversation_not_found",
        )
    return conversation


def chat_start(*, user: AbstractBaseUser, request: ChatRequest, idempotency_key: str = "") -> Run:
    """Start the run that answers ``request``. Continuing a conversation adds
    only the new user message; otherwise a new conversation gets the earlier
    messages of the request, then the run, in one transaction. A repeat of
    an earlier request (same ``idempotency_key``) gets that request's run
    back, marked ``replayed``, and creates nothing."""
    options = _run_options(request)
    check_images(model=options.model, images=[*request.images, *(i for p in request.prior for i in p.images)])
    replay = run_for_idempotency_key(user=user, key=idempotency_key, content=request.content)
    if replay is not None:
        return replay
    continued = continued_rounds(user=user, rounds=request.continued)
    background = is_background_task(request.model)
    conversation: Conversation | None = None
    if request.conversation_id is not None:
        conversation = _conversation(user, request.conversation_id)
    elif not background and not continued:
        conversation = conversation_for_history(user, request.prior)
    stored: list[str] = []  # files this request's parts stored: removed again if it starts nothing

    def store(parts: Sequence[FilePart]) -> list[str]:
        # Outside the transaction below: a file's bytes are written before its
        # row, and a rollback would leave them where no row leads.
        ids = []
        for part in parts:
            if part.file_id is not None:
                ids.append(part.file_id)  # checked as any attachment by run_start
            else:
                ids.append(str(file_create(user=user, source=StoredFile.Source.UPLOAD, name=part.filename,
                                           content=part.data).pk))
                stored.append(ids[-1])
        return ids

    try:
        attachments = store(request.files)
        if conversation is not None:
            run = run_start(user=user, conversation=conversation, content=request.content, options=options,
                            idempotency_key=idempotency_key, images=request.images, attachments=attachments)
        else:
            run = _new_conversation_run(user=user, request=request, options=options, continued=continued,
                                        idempotency_key=idempotency_key, attachments=attachments,
                                        prior_files=[store(prior.files) for prior in request.prior])
    except BaseException:
        _discard(user, stored)
        raise
    if run.replayed:
        _discard(user, stored)
    return run


def _new_conversation_run(*, user: AbstractBaseUser, request: ChatRequest, options: RunOptions,
                          continued: list[dict[str, Any]], idempotency_key: str, attachments: list[str],
                          prior_files: list[list[str]]) -> Run:
    """A new conversation with the request's earlier messages (and their
    files), then the run, in one transaction."""
    source = Conversation.Source.TASK if is_background_task(request.model) else Conversation.Source.OPENAI
    with transaction.atomic():
        conversation = Conversation.objects.create(
            user=user, source=source, title=" ".join(request.content.split())[:80])
        parent: Message | None = None  # the earlier messages are one branch, in the request's order
        for prior, file_ids in zip(request.prior, prior_files):
            message = parent = Message.objects.create(
                conversation=conversation, role=prior.role, content=prior.content, parent=parent,
                content_json=content_parts(prior.content, prior.images, file_ids), tool_rounds=prior.tool_rounds or [])
            StoredFile.objects.filter(pk__in=file_ids, user=user).update(message=message, conversation=conversation)
        run = run_start(user=user, conversation=conversation, content=request.content, options=options,
                        idempotency_key=idempotency_key, continued_rounds=continued, images=request.images,
                        attachments=attachments)
        if run.replayed:
            # A repeat that raced the first request: keep none of this request's rows.
            transaction.set_rollback(True)
        return run


def _discard(user: AbstractBaseUser, file_ids: list[str]) -> None:
    """Remove the files a request stored for its ``file`` parts when it
    started nothing: rows now, bytes as the deletion commits."""
    for file in StoredFile.objects.filter(pk__in=file_ids, user=user, message__isnull=True):
        file_delete(file=file)


def check_images(*, model: str, images: list[str]) -> None:
    """Images go to models that take them (``chatforge/llm/image_support.py``)."""
    refusal = image_refusal(model, urls=images) if images else None
    if refusal:
        raise OpenAIError(refusal, status=400, param="messages", code="images_not_supported")


def ignored_parameters(*, model: str, sampling: dict[str, Any]) -> list[str]:
    """The sampling parameters the model's provider does not have (they are
    sent to nobody): told to the client in ``X-ChatForge-Ignored-Parameters``."""
    if not sampling:
        return []
    model = answering_model(model)
    kind = DEMO_MODEL if model == DEMO_MODEL else str(resolve_model(model).kind)
    return sorted(set(sampling) - SUPPORTED.get(kind, frozenset()))


def chat_cancel(*, user: AbstractBaseUser, run_id: str) -> None:
    run = run_of(user, run_id)
    if run is not None and not run.is_terminal:
        run_request_cancel(run=run)


def round_calls(*, run_id: str, iteration: int) -> list[ToolCallOut]:
    """A round's tool calls in the order the model made them. They are
    written in one transaction before any of their events is published, so
    the first ``tool_call`` event of a round finds them all."""
    rows = ToolInvocation.objects.filter(run_id=run_id, iteration=iteration).order_by("position")
    return [ToolCallOut(id=r.tool_call_id, name=r.name, arguments=r.arguments or "{}") for r in rows]


@dataclass(frozen=True)
class RunEnd:
    status: str
    content: str
    finish_reason: str
    usage: dict[str, Any]
    error: str


def run_end(*, run_id: str) -> RunEnd | None:
    """How a run ended, from Postgres (None while it has not). A run that no
    longer exists (its conversation was deleted) has ended as cancelled."""
    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        return RunEnd(status=Run.Status.CANCELLED, content="", finish_reason="cancelled", usage={},
                      error=RUN_GONE)
    if not run.is_terminal:
        return None
    message = Message.objects.filter(run=run, role=Message.Role.ASSISTANT).first()
    return RunEnd(
        status=run.status,
        content=message.content if message else "",
        finish_reason=run.finish_reason or "stop",
        usage=run.usage or {},
        error=run.error,
    )


def run_error_kind(*, run_id: str) -> str:
    """The provider's kind of failure that ended a failed run ("" when the
    run failed for another reason or no longer exists)."""
    return Run.objects.filter(pk=run_id).values_list("error_kind", flat=True).first() or ""


def model_list() -> list[dict[str, Any]]:
    """``/v1/models`` items: the built-in demo model and the enabled model rows."""
    statuses = all_validation_statuses()
    rows = LanguageModel.objects.select_related("provider").filter(enabled=True, provider__enabled=True)
    items = [{"id": "demo", "object": "model", "created": 0, "owned_by": "chatforge"}]
    items += [
        {"id": r.name, "object": "model", "created": int(r.created_at.timestamp()), "owned_by": r.provider.name}
        for r in rows
        if r.name != "demo"
    ]
    for item in items:
        status = statuses.get(item["id"])
        item["validated"] = bool(status and status.validated)
    default = settings.CHATFORGE_DEFAULT_MODEL
    items.sort(key=lambda item: item["id"] != default)  # the default model first, the rest in order
    background = listed_model()
    if background is not None:
        answering = statuses.get(answering_model(background["id"]))
        items.append({**background, "validated": bool(answering and answering.validated)})
    return items
