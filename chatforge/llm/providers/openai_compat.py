"""Adapter for OpenAI Chat Completions and servers that copy it (Ollama
``/v1``, vLLM, LM Studio, llama.cpp, OpenRouter …) via the official SDK.

The SDK handles HTTP and SSE framing; its own retries are off by default
(``max_retries=0``) because the engine retries whole turns. We do not use its
stream *accumulator*: it concatenates repeated ids/names and merges Ollama's
parallel calls that all claim ``index: 0``. Tool calls are assembled by
:class:`ToolCallAccumulator`, everything else by :class:`_TurnState` below.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, assert_never

import openai

from chatforge.llm.providers._openai_client import as_built_body, openai_client, stream_json_events
from chatforge.llm.providers._openai_errors import (
    default_where,
    protocol_error,
    provider_error_from,
    total_timeout_error,
)
from chatforge.llm.providers.base import (
    ChatMessage,
    ProviderError,
    ReasoningDelta,
    StreamItem,
    TextDelta,
    ToolCall,
    TurnRequest,
    TurnResult,
)
from chatforge.llm.providers.failures import logged_failure
from chatforge.llm.providers.images import content_parts
from chatforge.llm.providers.tool_call_accumulator import ToolCallAccumulator, field_of

logger = logging.getLogger(__name__)

CHUNK_OBJECT = "chat.completion.chunk"
# Options the engine may set that mean the same thing on every compatible server.
# ``verbosity`` is OpenAI's (gpt-5); the engine only sets options the model supports.
PASS_THROUGH_OPTIONS = (
    "temperature", "max_tokens", "reasoning_effort", "verbosity",
    "top_p", "stop", "seed", "presence_penalty", "frequency_penalty", "response_format", "user",
)
# Only meaningful with tools (a server may refuse them without).
TOOL_OPTIONS = ("parallel_tool_calls", "tool_choice")
# Non-standard delta fields carrying "thinking" text: vLLM/DeepSeek use
# ``reasoning_content``, Ollama/OpenRouter/newer vLLM ``reasoning``. Read one
# per delta so a server sending both does not double the text.
REASONING_FIELDS = ("reasoning_content", "reasoning")
KNOWN_FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter"})


class OpenAICompatibleProvider:
    """``ChatProvider`` for any OpenAI Chat Completions endpoint.

    ``timeout_s`` bounds a whole turn; ``idle_timeout_s`` is the longest gap
    between bytes of a stream (exceeded: ``ErrorKind.STALLED``). A
    non-streaming call waits up to ``timeout_s`` for its one response.
    """

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        timeout_s: float = 600.0,
        idle_timeout_s: float = 60.0,
        connect_timeout_s: float = 5.0,
        max_retries: int = 0,
    ) -> None:
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.idle_timeout_s = idle_timeout_s
        self._where = default_where(base_url)
        self._client, self._whole_response_timeout = openai_client(
            base_url=base_url,
            api_key=api_key,
            timeout_s=timeout_s,
            idle_timeout_s=idle_timeout_s,
            connect_timeout_s=connect_timeout_s,
            max_retries=max_retries,
        )

    def stream_turn(self, request: TurnRequest) -> Iterator[StreamItem]:
        if not request.stream:
            yield from self._complete(request)
            return
        deadline = time.monotonic() + self.timeout_s
        try:
            stream = stream_json_events(self._client, "/chat/completions", request_params(request))
        except openai.OpenAIError as exc:
            raise self._error(exc, request) from exc
        state = _TurnState()
        try:
            for chunk in stream:
                yield from state.consume(chunk)
                if time.monotonic() > deadline:
                    raise total_timeout_error(self._where, self.timeout_s)
        except openai.OpenAIError as exc:
            raise self._error(exc, request) from exc
        except ValueError as exc:  # json.JSONDecodeError: a malformed event
            raise self._logged(
                protocol_error(self._where, f"sent a malformed stream event: {exc}"), request
            ) from exc
        finally:
            # Runs on normal end, on error and on GeneratorExit (the caller
            # cancelled): the HTTP response must not outlive the generator.
            stream.close()
        yield state.result(where=self._where)

    def _complete(self, request: TurnRequest) -> Iterator[StreamItem]:
        """``request.stream == False``: one ``chat.completion``, replayed as
        at most one reasoning delta, one text delta and the result."""
        params = {**request_params(request), "stream": False}
        params.pop("stream_options")
        try:
            completion = self._client.chat.completions.create(
                messages=[], **as_built_body(params), timeout=self._whole_response_timeout
            )
        except openai.OpenAIError as exc:
            raise self._error(exc, request) from exc
        except ValueError as exc:
            raise self._logged(
                protocol_error(self._where, f"sent a malformed response: {exc}"), request
            ) from exc
        result = result_from_completion(completion, where=self._where)
        if result.reasoning:
            yield ReasoningDelta(result.reasoning)
        if result.text:
            yield TextDelta(result.text)
        yield result

    def _error(self, exc: openai.OpenAIError, request: TurnRequest) -> ProviderError:
        error = provider_error_from(
            exc, base_url=self.base_url, model=request.model, idle_timeout_s=self.idle_timeout_s
        )
        return self._logged(error, request)

    def _logged(self, error: ProviderError, request: TurnRequest) -> ProviderError:
        return logged_failure(error, provider=self.name, model=request.model)


def result_from_completion(completion: Any, *, where: str) -> TurnResult:
    """The ``TurnResult`` of a non-streaming ``chat.completion``."""
    choices = getattr(completion, "choices", None) or []
    if not choices:
        raise protocol_error(where, "answered without any choice")
    choice = choices[0]
    message = getattr(choice, "message", None)
    accumulator = ToolCallAccumulator()
    for index, call in enumerate(getattr(message, "tool_calls", None) or ()):
        function = getattr(call, "function", None)
        accumulator.add(
            {
                "index": index,
                "id": getattr(call, "id", None),
                "function": {
                    "name": getattr(function, "name", None),
                    "arguments": getattr(function, "arguments", None),
                },
            }
        )
    calls = accumulator.tool_calls()
    text = "".join(t for t in (getattr(message, "content", None), getattr(message, "refusal", None)) if t)
    usage = getattr(completion, "usage", None)
    return TurnResult(
        text=text,
        tool_calls=calls,
        finish_reason=_normalise_finish_reason(
            getattr(choice, "finish_reason", None) or "stop", has_calls=bool(calls)
        ),
        usage=_usage_dict(usage) if usage is not None else {},
        reasoning=_reasoning_text(message),
        response_id=getattr(completion, "id", None),
    )


def request_params(request: TurnRequest) -> dict[str, Any]:
    """The keyword arguments for ``chat.completions.create``.

    ``tools`` is only sent when non-empty: an empty list is rejected by some
    servers, and leaving ``tool_choice`` out means "auto" with tools and
    "none" without, which is exactly what the engine wants.
    """
    params: dict[str, Any] = {
        "model": request.model,
        "messages": [message_to_openai(message) for message in request.messages],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        params["tools"] = request.tools
    for key in PASS_THROUGH_OPTIONS + (TOOL_OPTIONS if request.tools else ()):
        if request.options.get(key) is not None:
            params[key] = request.options[key]
    ignored = sorted(set(request.options) - set(PASS_THROUGH_OPTIONS) - set(TOOL_OPTIONS))
    if ignored:
        logger.debug("Ignoring options the OpenAI adapter does not support: %s", ignored)
    return params


def message_to_openai(message: ChatMessage) -> dict[str, Any]:
    """One neutral message in the OpenAI Chat Completions wire shape."""
    match message.role:
        case "user" if message.images:
            return {"role": "user", "content": content_parts(message.content or "", message.images)}
        case "system" | "user":
            return {"role": message.role, "content": message.content or ""}
        case "assistant":
            return _assistant_to_openai(message)
        case "tool":
            return {
                "role": "tool",
                "tool_call_id": message.tool_call_id or "",
                "content": message.content or "",
            }
        case _:
            assert_never(message.role)


def _assistant_to_openai(message: ChatMessage) -> dict[str, Any]:
    if not message.tool_calls:
        return {"role": "assistant", "content": message.content or ""}
    return {
        "role": "assistant",
        # ``null`` content is the documented form for a turn that only calls tools.
        "content": message.content or None,
        "tool_calls": [_tool_call_to_openai(call) for call in message.tool_calls],
    }


def _tool_call_to_openai(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments or "{}"},
    }


@dataclass
class _TurnState:
    """Everything learned from the chunks of one streamed turn."""

    text_parts: list[str] = field(default_factory=list)
    reasoning_parts: list[str] = field(default_factory=list)
    tool_calls: ToolCallAccumulator = field(default_factory=ToolCallAccumulator)
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    response_id: str | None = None

    def consume(self, chunk: Any) -> Iterator[TextDelta | ReasoningDelta]:
        """Apply one chunk, yielding the deltas worth forwarding at once."""
        kind = field_of(chunk, "object")
        if kind is not None and kind != CHUNK_OBJECT:
            # e.g. Azure's content-filter events with ``object: ""``.
            return
        if self.response_id is None and field_of(chunk, "id"):
            self.response_id = field_of(chunk, "id")
        if field_of(chunk, "usage") is not None:
            self.usage = _usage_dict(field_of(chunk, "usage"))
        for choice in field_of(chunk, "choices") or ():
            if field_of(choice, "index") not in (0, None):
                continue  # we never ask for n > 1
            yield from self._consume_choice(choice)

    def _consume_choice(self, choice: Any) -> Iterator[TextDelta | ReasoningDelta]:
        delta = field_of(choice, "delta")
        if delta is not None:
            # The delta is applied before finish_reason: some servers put the
            # last fragment in the finishing chunk.
            reasoning = _reasoning_text(delta)
            if reasoning:
                self.reasoning_parts.append(reasoning)
                yield ReasoningDelta(reasoning)
            # A refusal is what the model said instead of an answer; show it
            # as text rather than dropping it.
            for text in (field_of(delta, "content"), field_of(delta, "refusal")):
                if text:
                    self.text_parts.append(text)
                    yield TextDelta(text)
            self.tool_calls.add_all(field_of(delta, "tool_calls"))
        if field_of(choice, "finish_reason"):
            self.finish_reason = field_of(choice, "finish_reason")

    def result(self, *, where: str) -> TurnResult:
        if self.finish_reason is None:
            # The HTTP stream ended cleanly but the model never finished: a
            # proxy cut it short. Recording it as a complete turn would be wrong.
            raise protocol_error(where, "ended the stream before the model finished")
        calls = self.tool_calls.tool_calls()
        return TurnResult(
            text="".join(self.text_parts),
            tool_calls=calls,
            finish_reason=_normalise_finish_reason(self.finish_reason, has_calls=bool(calls)),
            usage=self.usage,
            reasoning="".join(self.reasoning_parts),
            response_id=self.response_id,
        )


def _reasoning_text(delta: Any) -> str:
    """Reasoning text of a stream delta or a whole message."""
    for name in REASONING_FIELDS:
        value = field_of(delta, name)
        if isinstance(value, str) and value:
            return value
    return ""


def _normalise_finish_reason(raw: str, *, has_calls: bool) -> str:
    """Tool calls are detected by presence: a forced ``tool_choice`` gives
    ``stop`` with calls, and Ollama keeps ``stop`` too (docs/providers.md,
    "Vendor notes")."""
    if has_calls:
        return "tool_calls"
    if raw in KNOWN_FINISH_REASONS and raw != "tool_calls":
        return raw
    logger.debug("Treating finish_reason %r without tool calls as 'stop'", raw)
    return "stop"


def _usage_dict(usage: Any) -> dict[str, int]:
    result = {
        name: int(field_of(usage, name) or 0)
        for name in ("prompt_tokens", "completion_tokens", "total_tokens")
    }
    reasoning_tokens = field_of(field_of(usage, "completion_tokens_details"), "reasoning_tokens")
    if reasoning_tokens is not None:
        result["reasoning_tokens"] = int(reasoning_tokens)
    cached_tokens = field_of(field_of(usage, "prompt_tokens_details"), "cached_tokens")
    if cached_tokens is not None:
        result["cached_tokens"] = int(cached_tokens)
    return result
