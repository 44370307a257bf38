"""Starting a run: the user's message and the run are written in one
transaction, and the first model turn is enqueued only after it commits."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from chatforge.catalog.models import Assistant
from chatforge.conversations.models import Conversation, LlmTurn, Message, Run
from chatforge.errors import InvalidRequest, UnknownTool

from .. import dispatch
from ..tooling import get_registry


@dataclass(frozen=True)
class RunOptions:
    model: str = ""
    tools: list[str] | None = None  # None: the assistant's tools, else every enabled tool
    max_iterations: int | None = None
    reasoning_effort: str | None = None
    assistant: str = ""  # an Assistant's name


def _assistant(name: str) -> Assistant | None:
    if not name:
        return None
    assistant = Assistant.objects.filter(name=name).first()
    if assistant is None:
        available = list(Assistant.objects.values_list("name", flat=True))
        raise InvalidRequest(
            f"Unknown assistant '{name}'. Available assistants: {', '.join(available) or 'none'}.",
            details={"field": "assistant", "available": available},
        )
    return assistant


def check_run_options(options: RunOptions) -> dict:
    """Validate the request's options (with the assistant's defaults filled
    in); return what the run stores."""
    registry = get_registry()
    assistant = _assistant(options.assistant)
    requested = options.tools if options.tools is not None else (assistant.tools if assistant else None)
    if requested and not settings.CHATFORGE_TOOLS_ENABLED:
        raise InvalidRequest("Tools are turned off on this server; send the message without 'tools'.")
    if requested is None:
        tools = registry.names()
    else:
        unknown = [name for name in requested if registry.get(name) is None]
        if unknown:
            raise UnknownTool(
                f"Unknown tool(s): {', '.join(unknown)}. Available tools: {', '.join(registry.names())}.",
                details={"unknown": unknown, "available": registry.names()},
            )
        tools = list(dict.fromkeys(requested))
    cap = options.max_iterations
    if cap is None:
        cap = assistant.max_iterations if assistant and assistant.max_iterations is not None else settings.CHATFORGE_MAX_ITERATIONS
    limit = settings.CHATFORGE_MAX_ITERATIONS_LIMIT
    if not 0 <= cap <= limit:
        raise InvalidRequest(
            f"max_iterations must be between 0 and {limit}; got {cap}.",
            details={"field": "max_iterations"},
        )
    stored: dict = {"tools": tools, "max_iterations": cap}
    if options.reasoning_effort:
        stored["reasoning_effort"] = options.reasoning_effort
    if assistant is not None:
        stored["assistant"] = assistant.name
        stored["system_prompt"] = assistant.system_prompt
        if assistant.model:
            stored["assistant_model"] = assistant.model
    return stored


def run_start(
    *, user: AbstractBaseUser, conversation: Conversation, content: str, options: RunOptions
) -> Run:
    if not content.strip():
        raise InvalidRequest("The message is empty: send some text.", details={"field": "content"})
    if len(content) > settings.CHATFORGE_MAX_MESSAGE_CHARS:
        raise InvalidRequest(
            f"The message is {len(content)} characters long; the limit is "
            f"{settings.CHATFORGE_MAX_MESSAGE_CHARS}.",
            details={"field": "content"},
        )
    stored_options = check_run_options(options)
    model = options.model or stored_options.pop("assistant_model", "") or settings.CHATFORGE_DEFAULT_MODEL
    with transaction.atomic():
        message = Message.objects.create(
            conversation=conversation, role=Message.Role.USER, content=content
        )
        run = Run.objects.create(
            conversation=conversation,
            user=user,
            user_message=message,
            model=model,
            options=stored_options,
            heartbeat_at=timezone.now(),
        )
        LlmTurn.objects.create(run=run, iteration=0, offered_tools=stored_options["max_iterations"] > 0)
        updates = {"updated_at": timezone.now()}
        if not conversation.title:
            updates["title"] = content.strip().splitlines()[0][:80]
        Conversation.objects.filter(pk=conversation.pk).update(**updates)
        dispatch.llm_turn(str(run.id), 0)
    return run


def run_request_cancel(*, run: Run) -> Run:
    """Ask a run to stop. Cooperative: the engine sees the flag between steps
    and while the model streams, and ends the run as cancelled."""
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)
    run.refresh_from_db()
    return run
