"""The OpenAI-compatible endpoints: ``POST /v1/chat/completions`` and
``GET /v1/models``.

A chat completion is an ordinary ChatForge run: the view checks the request,
starts the run (``chat_start``), and follows the run's event log while the
worker fleet does the work — streaming each event out as a
``chat.completion.chunk`` (``stream: true``), or waiting for the end and
answering one ``chat.completion`` with ``tool_events``. A client that goes
away before the end cancels the run (docs/openai-api.md, "The streamed
answer" and "The non-streamed answer").

Async views (Django runs them under ASGI without a thread per request); the
database is reached through ``db_sync_to_async``, which gives the
pooled connection back after each call instead of holding it for the whole
stream.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from chatforge.accounts.auth_failures import TooManyFailures, client_of_request
from chatforge.accounts.tokens import authenticate_token
from chatforge.api.errors import RETRY_AFTER_S, method_not_allowed
from chatforge.api.json_input import InvalidJSON, parse_json
from chatforge.api.openai_errors import OpenAIError, from_chatforge
from chatforge.db.connections import db_sync_to_async
from chatforge.errors import ChatForgeError
from chatforge.errors.outages import is_outage
from chatforge.llm.providers.base import ErrorKind
from orchestration.event_log.events import TERMINAL_TYPES
from orchestration.services.run_follower import follow_run
from orchestration.services.runs import check_idempotency_key

from . import services
from .background_tasks import is_background_task
from .translate import (
    ROUND_SEPARATOR,
    SHOW_TOOL_CALLS_HEADER,
    SSE_DONE,
    SSE_KEEPALIVE,
    ChatRequest,
    ChunkRenderer,
    ToolCallOut,
    ToolEventCollector,
    completion_body,
    parse_chat_request,
    sse,
)

logger = logging.getLogger(__name__)

# The request's sampling parameters the model's provider does not have.
IGNORED_PARAMETERS_HEADER = "X-ChatForge-Ignored-Parameters"
_KEEPALIVE_S = 15.0  # an SSE comment when nothing was sent for this long (proxies close idle streams)


# ---------------------------------------------------------------------------
# Request plumbing
# ---------------------------------------------------------------------------


async def _authenticate(request: HttpRequest) -> AbstractBaseUser:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise OpenAIError(
            "You didn't provide an API key. Send your ChatForge API token as 'Authorization: Bearer "
            "<token>' (OpenAI clients: api_key=<token>); create a token in your ChatForge settings.",
            status=401,
            code="invalid_api_key",
        )
    try:
        user = await db_sync_to_async(authenticate_token)(token, client=client_of_request(request))
    except TooManyFailures as exc:
        raise OpenAIError(str(exc), status=429, code="throttled",
                          headers={"Retry-After": str(exc.retry_after_s)}) from None
    if user is None:
        raise OpenAIError(
            "Incorrect API key provided: it is not a valid ChatForge API token, or it was revoked. "
            "Create a new one in your ChatForge settings.",
            status=401,
            code="invalid_api_key",
        )
    return user


def _json_body(request: HttpRequest) -> Any:
    try:
        raw = request.body
    except RequestDataTooBig:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raise OpenAIError(f"The request body is larger than {limit} bytes; send less.", status=413,
                          code="request_too_large") from None
    try:
        return parse_json(raw or b"")
    except InvalidJSON as exc:
        raise OpenAIError(f"{exc} Send a JSON object with 'model' and 'messages'.", code="invalid_json") from None




async def _cancel(user: AbstractBaseUser, run_id: str) -> None:
    """Cancel the run of a client that went away. Shielded: the request's
    task is being cancelled while this runs."""
    try:
        await asyncio.shield(db_sync_to_async(services.chat_cancel)(user=user, run_id=run_id))
        logger.info("openai api: client went away; cancelled run %s", run_id)
    except Exception:
        logger.exception("openai api: cancelling run %s after the client went away failed", run_id)


# ---------------------------------------------------------------------------
# Following a run
# ---------------------------------------------------------------------------


class _RoundCalls:
    """Turns ``tool_call`` events into whole rounds: the first event of a
    round brings all of the round's calls (read from Postgres, where they
    were committed together), so a client gets one ``tool_calls`` chunk per
    round however the events were batched; later events of the round are
    already covered."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.sent: set[str] = set()

    async def new_calls(self, data: dict[str, Any]) -> list[ToolCallOut]:
        if data.get("id") in self.sent:
            return []
        calls = await db_sync_to_async(services.round_calls)(
            run_id=self.run_id, iteration=data.get("iteration", 0))
        calls = [c for c in calls if c.id not in self.sent]
        if data.get("id") not in {c.id for c in calls}:  # not in the table: trust the event
            calls.append(_call_of(data))
        self.sent.update(c.id for c in calls)
        return calls


async def _failure_kind(run_id: str) -> str:
    """``Run.error_kind``, or "" when the database cannot say right now (the
    answer is then the generic run failure, which is still true)."""
    try:
        return await db_sync_to_async(services.run_error_kind)(run_id=run_id)
    except Exception as exc:
        if not is_outage(exc):
            raise
        return ""


async def _run_error(kind: str, data: dict[str, Any], run_id: str, *, model: str) -> OpenAIError:
    if kind == "run.cancelled":
        return OpenAIError(
            f"The run was cancelled before it finished (run {run_id}); what it produced is stored in the "
            "conversation.",
            status=409,
            code="run_cancelled",
            retry=False,
        )
    reason = data.get("error") or "no reason recorded"
    if await _failure_kind(run_id) == ErrorKind.NOT_FOUND:
        # A model name no admin row knows goes to the default provider as is;
        # when that provider does not have it either, the name was the
        # client's mistake, answered as OpenAI answers an unknown model.
        return OpenAIError(
            f"The model '{model}' does not exist on its provider ({reason}); GET /v1/models lists the "
            f"models configured on this server (run {run_id}).",
            status=404,
            param="model",
            code="model_not_found",
            retry=False,
        )
    return OpenAIError(
        f"The run failed: {reason} (run {run_id}).",
        status=500,
        type_="server_error",
        code="run_failed",
        retry=False,
    )


# ---------------------------------------------------------------------------
# POST /v1/chat/completions
# ---------------------------------------------------------------------------


@csrf_exempt
async def chat_completions(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return method_not_allowed(request, ["POST"])
    try:
        user = await _authenticate(request)
        chat = parse_chat_request(_json_body(request),
                                  show_tool_calls_header=request.headers.get(SHOW_TOOL_CALLS_HEADER))
        idempotency_key = check_idempotency_key(request.headers.get("Idempotency-Key"))
        if not is_background_task(chat.model):  # a frontend's own request, not a person's message
            await db_sync_to_async(services.check_message_rate)(user=user, meta=request.META)
        run = await db_sync_to_async(services.chat_start)(
            user=user, request=chat, idempotency_key=idempotency_key)
        ignored = await db_sync_to_async(services.ignored_parameters)(model=chat.model, sampling=chat.sampling)
    except OpenAIError as exc:
        return exc.response()
    except ChatForgeError as exc:
        return from_chatforge(exc).response()
    run_id, conversation_id = str(run.id), str(run.conversation_id)
    renderer = ChunkRenderer(
        completion_id=f"chatcmpl-{run.id.hex}",
        created=int(time.time()),
        model=chat.model,
        conversation_id=conversation_id,
        run_id=run_id,
    )
    headers = {"X-ChatForge-Conversation-Id": conversation_id, "X-ChatForge-Run-Id": run_id}
    if ignored:
        headers[IGNORED_PARAMETERS_HEADER] = ", ".join(ignored)
    if run.replayed:
        headers["Idempotent-Replayed"] = "true"  # the first request's run, followed from its start
    if chat.stream:
        response = StreamingHttpResponse(
            _stream(user=user, chat=chat, renderer=renderer), content_type="text/event-stream", headers=headers
        )
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response
    response = await _complete(user=user, renderer=renderer)
    for name, value in headers.items():
        response[name] = value
    return response


async def _stream(*, user: AbstractBaseUser, chat: ChatRequest, renderer: ChunkRenderer) -> AsyncIterator[bytes]:
    """The SSE body (docs/openai-api.md, "The streamed answer"). The first
    chunk goes out before the model says anything, with the conversation and
    run ids."""
    run_id = renderer.run_id
    ended = False
    rounds = _RoundCalls(run_id)
    # Text was streamed since the last tool round: the next turn's text is
    # set apart from it by ROUND_SEPARATOR.
    text_streamed = separator_due = False
    try:
        yield sse(renderer.first())
        last_sent = time.monotonic()
        async with aclosing(follow_run(run_id, idle=True)) as events:
            async for event in events:
                out: list[bytes] = []
                if event is None:
                    if time.monotonic() - last_sent >= _KEEPALIVE_S:
                        out.append(SSE_KEEPALIVE)
                else:
                    kind, data = event["type"], event.get("data") or {}
                    if kind == "content.delta" and data.get("text"):
                        text = (ROUND_SEPARATOR if separator_due else "") + data["text"]
                        separator_due, text_streamed = False, True
                        out.append(sse(renderer.text(text)))
                    elif kind == "reasoning.delta" and data.get("text"):
                        out.append(sse(renderer.reasoning(data["text"])))
                    elif kind == "tool_call":
                        separator_due = separator_due or text_streamed
                        text_streamed = False
                        out.extend(await _tool_call_chunks(chat, renderer, rounds, data))
                    elif kind == "tool_output":
                        out.append(sse(_tool_output_chunk(chat, renderer, data)))
                    elif kind == "run.completed":
                        ended = True
                        out.append(sse(renderer.finish(data.get("finish_reason", "stop"))))
                        if chat.include_usage:
                            out.append(sse(renderer.usage(data.get("usage"))))
                        out.append(SSE_DONE)
                    elif kind in ("run.failed", "run.cancelled"):
                        ended = True
                        error = await _run_error(kind, data, run_id, model=renderer.model)
                        out.append(sse(error.body(conversation_id=renderer.conversation_id, run_id=run_id)))
                for part in out:
                    yield part
                if out:
                    last_sent = time.monotonic()
    except Exception:
        # Headers are out: the failure can only be reported in the stream.
        logger.exception("openai api: streaming run %s failed", run_id)
        error = OpenAIError(
            f"Following the run failed on the server; it may still finish: GET /api/runs/{run_id}/ "
            "shows its state and the conversation will hold its answer.",
            status=500, type_="server_error", code="stream_failed",
        )
        yield sse(error.body(conversation_id=renderer.conversation_id, run_id=run_id))
        ended = True  # the run itself is fine: leave it running
    finally:
        if not ended:
            await _cancel(user, run_id)


async def _tool_call_chunks(chat: ChatRequest, renderer: ChunkRenderer, rounds: _RoundCalls,
                            data: dict[str, Any]) -> list[bytes]:
    """A call of the client's own tool is a standard ``tool_calls`` delta: it
    is the client's to run. A server tool call is one too (one chunk per
    round) only for a client that asked; for any other it would be work to
    do, so it goes in the ``chatforge`` extension object, which clients ignore."""
    if chat.show_tool_calls:
        calls = await rounds.new_calls(data)
        return [sse(renderer.tool_calls(calls))] if calls else []
    call = _call_of(data)
    if data.get("executor") == "client":
        return [sse(renderer.tool_calls([call]))]
    return [sse(renderer.server_tool_event("tool_call", call.as_openai()))]


def _call_of(data: dict[str, Any]) -> ToolCallOut:
    return ToolCallOut(id=data.get("id", ""), name=data.get("name", ""), arguments=data.get("arguments") or "{}")


def _tool_output_chunk(chat: ChatRequest, renderer: ChunkRenderer, data: dict[str, Any]) -> dict[str, Any]:
    output = {"tool_call_id": data.get("tool_call_id", ""), "name": data.get("name", ""),
              "output": data.get("output", "")}
    if chat.show_tool_calls:
        return renderer.tool_output(**output)
    return renderer.server_tool_event("tool_output", output)


def _unreachable_mid_run(renderer: ChunkRenderer) -> HttpResponse:
    """503 for a request whose run started but could not be followed to its
    end (the database or Redis went away): the run goes on, so the client is
    told not to retry (a retry would start a second run)."""
    run_id = renderer.run_id
    return OpenAIError(
        f"The run started (run {run_id}) and goes on, but following it failed: the database or Redis "
        f"cannot be reached. Its answer will be in the conversation; GET /api/runs/{run_id}/ shows its "
        "state. Do not send the request again.",
        status=503, type_="server_error", code="service_unavailable", retry=False,
        headers={"Retry-After": str(RETRY_AFTER_S)},
    ).response(conversation_id=renderer.conversation_id, run_id=run_id)


async def _complete(*, user: AbstractBaseUser, renderer: ChunkRenderer) -> HttpResponse:
    """Wait for the run's end; answer one ``chat.completion`` with the
    ``tool_events`` collected on the way."""
    run_id = renderer.run_id
    collector = ToolEventCollector()
    rounds = _RoundCalls(run_id)
    client_calls: list[ToolCallOut] = []  # the client's to run: the message's tool_calls
    terminal: dict[str, Any] | None = None
    timeout_s = settings.CHATFORGE_LLM_TIMEOUT_S
    try:
        async with asyncio.timeout(timeout_s), aclosing(follow_run(run_id)) as events:
            async for event in events:
                if event["type"] == "tool_call":
                    data = event.get("data") or {}
                    if data.get("executor") == "client":
                        client_calls.append(_call_of(data))
                    else:
                        collector.on_tool_calls(await rounds.new_calls(data))
                elif event["type"] in TERMINAL_TYPES:
                    terminal = event
                else:
                    collector.on_event(event)
    except TimeoutError:
        await _cancel(user, run_id)
        return OpenAIError(
            f"The run did not finish within {timeout_s:g} s and was cancelled (run {run_id}). Use "
            "stream: true for long tool-using answers.",
            status=504,
            code="run_timeout",
            retry=False,
        ).response(conversation_id=renderer.conversation_id, run_id=run_id)
    except asyncio.CancelledError:
        await _cancel(user, run_id)  # the client went away
        raise
    except Exception as exc:
        if not is_outage(exc):
            raise
        return _unreachable_mid_run(renderer)
    assert terminal is not None
    data = terminal.get("data") or {}
    if terminal["type"] != "run.completed":
        return (await _run_error(terminal["type"], data, run_id, model=renderer.model)).response(
            conversation_id=renderer.conversation_id, run_id=run_id)
    try:
        end = await db_sync_to_async(services.run_end)(run_id=run_id)
    except Exception as exc:
        if not is_outage(exc):
            raise
        return _unreachable_mid_run(renderer)
    body = completion_body(
        completion_id=renderer.completion_id,
        created=renderer.created,
        model=renderer.model,
        content=end.content if end else "",
        finish=data.get("finish_reason", "stop"),
        usage=data.get("usage"),
        tool_events=collector.finish(),
        tool_calls=client_calls,
        conversation_id=renderer.conversation_id,
        run_id=run_id,
    )
    return JsonResponse(body)


# ---------------------------------------------------------------------------
# GET /v1/models
# ---------------------------------------------------------------------------


@csrf_exempt  # token-authenticated; without it a POST answered Django's HTML CSRF page
async def models_list(request: HttpRequest) -> HttpResponse:
    if request.method != "GET":
        return method_not_allowed(request, ["GET"])
    try:
        await _authenticate(request)
    except OpenAIError as exc:
        return exc.response()
    return JsonResponse({"object": "list", "data": await db_sync_to_async(services.model_list)()})


@csrf_exempt
async def model_detail(request: HttpRequest, model: str) -> HttpResponse:
    if request.method != "GET":
        return method_not_allowed(request, ["GET"])
    try:
        await _authenticate(request)
    except OpenAIError as exc:
        return exc.response()
    # Ids may hold slashes ("openai/gpt-4o"), so the route's <path:> takes a
    # trailing one too (/v1/models/demo/); it is never part of an id.
    model = model.rstrip("/")
    for item in await db_sync_to_async(services.model_list)():
        if item["id"] == model:
            return JsonResponse(item)
    return OpenAIError(
        f"The model '{model}' is not configured on this server; GET /v1/models lists those that are.",
        status=404,
        param="model",
        code="model_not_found",
    ).response()
