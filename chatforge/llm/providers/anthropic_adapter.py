"""Adapter for the Anthropic Messages API, streamed, via the official SDK (docs/providers.md).

The SDK does HTTP and SSE framing; its retries are off (the engine retries
whole turns). We read the raw stream events ourselves rather than using the
SDK's message accumulator, so that tool arguments keep the exact text the
model produced (the accumulator parses them) and every event type we do not
know is ignored.

Options (``TurnRequest.options``):

* ``max_tokens``: sent as is; Anthropic requires it, so it defaults to
  ``DEFAULT_MAX_TOKENS`` (4096).
* ``reasoning_effort`` turns on extended thinking, in one of two ways chosen
  per provider instance (``thinking_mode``), because Anthropic's models differ:

  - ``"budget"`` (default; models before Claude 4.6):
    ``thinking={"type": "enabled", "budget_tokens": N}`` with N per level from
    ``THINKING_BUDGETS``: minimal 1024 (the API's minimum), low 2048, medium
    8192, high 16384. The budget is added on top of ``max_tokens`` (the API
    counts thinking inside ``max_tokens``, which must exceed the budget), so
    ``max_tokens`` keeps meaning "room for the answer".
  - ``"adaptive"`` (Claude 4.6 and later, which reject ``budget_tokens``):
    ``thinking={"type": "adaptive"}`` and ``output_config={"effort": E}``
    with minimal mapped to ``low``.
* ``stop`` → ``stop_sequences``; ``tool_choice`` (auto / required → any /
  none / a named function → tool) and ``parallel_tool_calls: false`` →
  ``disable_parallel_tool_use``, sent only with tools.
* ``temperature``, ``top_p``, ``seed``, the penalties, ``response_format``,
  ``verbosity`` and anything else are ignored: the pinned SDK (API version
  2026-10-21) has no sampling parameters — the API answers 400 to
  ``temperature`` even at 1.0 — and there is no verbosity setting.

Thinking and tools: the API wants the thinking blocks of a tool-using turn
sent back, with their signatures, before its ``tool_use`` blocks. The adapter
keeps them in ``TurnResult.reasoning_details`` and also in the first tool
call's ``metadata["anthropic_thinking"]``, which is replayed verbatim (see
``_anthropic_messages``). When a continuation arrives without them (the
stored round lost its metadata), thinking is switched off for that request
instead of failing with a 400.

Prompt caching: the last system block and the last tool definition carry
``cache_control: {"type": "ephemeral"}``.

When the history holds tool calls but the request offers no tools (the forced
final turn after the iteration cap), the API would refuse the request
("Requests which include tool_use or tool_result blocks must define tools"),
so the called tools are declared with an empty schema and ``tool_choice``
``none``: the model sees the history but cannot call anything.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias
from urllib.parse import urlsplit

import anthropic
import httpx2

from chatforge.llm.providers._anthropic_errors import provider_error_from
from chatforge.llm.providers._anthropic_messages import (
    EPHEMERAL_CACHE,
    THINKING_METADATA_KEY,
    AnthropicConversation,
    to_anthropic,
)
from chatforge.llm.providers.base import (
    ErrorKind,
    ProviderError,
    ReasoningDelta,
    StreamItem,
    TextDelta,
    ToolCall,
    TurnRequest,
    TurnResult,
)
from chatforge.llm.providers.connection_reuse import drain_on_close
from chatforge.llm.providers.failures import logged_failure
from chatforge.llm.providers.sampling import forced_tool, stop_sequences
from chatforge.llm.providers.shared_http import shared_http_client
from tools.formats import to_anthropic as tools_to_anthropic

logger = logging.getLogger(__name__)

ThinkingMode: TypeAlias = Literal["budget", "adaptive"]

DEFAULT_MAX_TOKENS = 4096
THINKING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}
ADAPTIVE_EFFORTS = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}
SUPPORTED_OPTIONS = frozenset({"max_tokens", "reasoning_effort", "stop", "tool_choice", "parallel_tool_calls"})
DEFAULT_HOST = "api.anthropic.com"
# An empty key would make the SDK look for credentials in the environment and
# in profile files on disk; a placeholder gets a clear 401 instead.
PLACEHOLDER_API_KEY = "no-key-configured"
STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
RETIRED_TOOL_DESCRIPTION = "Not available in this turn."
# What a call can fail with: the SDK's errors, the transport's errors while a
# stream is read (the SDK does not wrap those), and a malformed ``data:`` line.
CALL_FAILURES = (anthropic.AnthropicError, httpx2.HTTPError, json.JSONDecodeError)


def _http_client() -> anthropic.DefaultHttpxClient:
    """The SDK's default HTTP client, keeping its connection after a stream
    closed before the end of its body (connection_reuse.py)."""
    return anthropic.DefaultHttpxClient(event_hooks={"response": [drain_on_close(httpx2)]})


class AnthropicProvider:
    """``ChatProvider`` for the Anthropic Messages API.

    ``timeout_s`` bounds a whole turn; ``idle_timeout_s`` is the longest
    silence allowed while a stream is open (exceeding it is ``STALLED``).
    """

    name = "anthropic"

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        timeout_s: float = 600.0,
        idle_timeout_s: float = 60.0,
        connect_timeout_s: float = 10.0,
        thinking_mode: ThinkingMode = "budget",
    ) -> None:
        self.base_url = base_url
        self.thinking_mode = thinking_mode
        self.timeout_s = timeout_s
        self.idle_timeout_s = idle_timeout_s
        connect = min(connect_timeout_s, timeout_s)
        # The pinned SDK is built on httpx2, so its own Timeout class is used.
        self._stream_timeout = anthropic.Timeout(timeout_s, read=idle_timeout_s, connect=connect)
        # A non-streamed answer sends nothing until it is complete.
        self._whole_timeout = anthropic.Timeout(timeout_s, connect=connect)
        self._client = anthropic.Anthropic(
            base_url=base_url,
            api_key=api_key or PLACEHOLDER_API_KEY,
            timeout=self._stream_timeout,
            max_retries=0,
            http_client=shared_http_client("anthropic", _http_client),
        )
        host = urlsplit(base_url).hostname or base_url
        self._where = "Anthropic" if host == DEFAULT_HOST else f"Anthropic API at {base_url}"

    def stream_turn(self, request: TurnRequest) -> Iterator[StreamItem]:
        params = request_params(request, thinking_mode=self.thinking_mode)
        if not request.stream:
            yield from self._whole_turn(request, params)
            return
        deadline = time.monotonic() + self.timeout_s
        try:
            stream = self._client.messages.create(**params, stream=True, timeout=self._stream_timeout)
        except CALL_FAILURES as exc:
            raise self._error(exc, request) from exc
        state = _TurnState()
        try:
            for event in stream:
                yield from state.consume(event)
                if time.monotonic() > deadline:
                    raise ProviderError(
                        f"{self._where} did not finish the response within {self.timeout_s:g} s",
                        retryable=True,
                        kind=ErrorKind.CONNECTION,
                    )
        except CALL_FAILURES as exc:
            raise self._error(exc, request) from exc
        finally:
            # Runs on normal end, on error and on GeneratorExit (the caller
            # cancelled): the HTTP response must not outlive the generator.
            stream.close()
        yield state.result(where=self._where)

    def _whole_turn(self, request: TurnRequest, params: dict[str, Any]) -> Iterator[StreamItem]:
        try:
            message = self._client.messages.create(**params, timeout=self._whole_timeout)
        except CALL_FAILURES as exc:
            raise self._error(exc, request) from exc
        state = _TurnState.from_message(message)
        result = state.result(where=self._where)
        if result.reasoning:
            yield ReasoningDelta(result.reasoning)
        if result.text:
            yield TextDelta(result.text)
        yield result

    def _error(self, exc: Exception, request: TurnRequest) -> ProviderError:
        error = provider_error_from(
            exc, where=self._where, model=request.model, idle_timeout_s=self.idle_timeout_s
        )
        return logged_failure(error, provider=self.name, model=request.model)


def request_params(request: TurnRequest, *, thinking_mode: ThinkingMode = "budget") -> dict[str, Any]:
    """The keyword arguments for ``messages.create`` (without ``stream``)."""
    conversation = to_anthropic(request.messages)
    options = request.options
    max_tokens = int(options.get("max_tokens") or DEFAULT_MAX_TOKENS)
    params: dict[str, Any] = {"model": request.model, "messages": conversation.messages}
    if conversation.system:
        params["system"] = conversation.system
    params.update(_tool_params(request, conversation))
    effort = _thinking_effort(options.get("reasoning_effort"), conversation)
    if effort and thinking_mode == "adaptive":
        params["thinking"] = {"type": "adaptive"}
        params["output_config"] = {"effort": ADAPTIVE_EFFORTS[effort]}
    elif effort:
        budget = THINKING_BUDGETS[effort]
        params["thinking"] = {"type": "enabled", "budget_tokens": budget}
        max_tokens += budget
    params["max_tokens"] = max_tokens
    if options.get("stop") is not None:
        params["stop_sequences"] = stop_sequences(options["stop"])
    if request.tools:
        choice = _tool_choice(options.get("tool_choice"), options.get("parallel_tool_calls"))
        if choice is not None:
            params["tool_choice"] = choice
    ignored = sorted(set(options) - SUPPORTED_OPTIONS)
    if ignored:
        logger.debug("Ignoring options the Anthropic adapter does not support: %s", ignored)
    return params


def _tool_choice(choice: Any, parallel: Any) -> dict[str, Any] | None:
    """OpenAI's ``tool_choice`` and ``parallel_tool_calls`` as Anthropic's one
    ``tool_choice``; None where both are the default (auto, parallel)."""
    forced = forced_tool(choice)
    if forced:
        result: dict[str, Any] = {"type": "tool", "name": forced}
    elif choice == "required":
        result = {"type": "any"}
    elif choice == "none":
        return {"type": "none"}
    elif parallel is False:
        result = {"type": "auto"}
    else:
        return None
    if parallel is False:
        result["disable_parallel_tool_use"] = True
    return result


def _tool_params(request: TurnRequest, conversation: AnthropicConversation) -> dict[str, Any]:
    if request.tools:
        tools = tools_to_anthropic(request.tools)
        tools[-1]["cache_control"] = dict(EPHEMERAL_CACHE)
        return {"tools": tools}
    if not conversation.has_tool_blocks():
        return {}
    retired = [
        {"name": name, "description": RETIRED_TOOL_DESCRIPTION, "input_schema": {"type": "object"}}
        for name in conversation.tool_names()
    ]
    if not retired:  # only tool results, whose calls were lost: nothing to declare
        return {}
    return {"tools": retired, "tool_choice": {"type": "none"}}


def _thinking_effort(effort: Any, conversation: AnthropicConversation) -> str | None:
    """The reasoning level to think at, or None for no thinking."""
    if effort is None or effort == "none":
        return None
    if str(effort) not in THINKING_BUDGETS:
        logger.debug("Unknown reasoning_effort %r; sending the request without thinking", effort)
        return None
    if conversation.continues_tool_use_without_thinking():
        logger.info(
            "Thinking blocks of the previous tool round are missing; this request goes without thinking"
        )
        return None
    return str(effort)


def _field(obj: Any, name: str) -> Any:
    """Read ``name`` from an SDK model or a plain mapping; ``None`` if absent."""
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


@dataclass
class _Block:
    """One content block being assembled, keyed by the stream's ``index``."""

    type: str
    id: str = ""
    name: str = ""
    parts: list[str] = field(default_factory=list)  # text, thinking or partial_json pieces
    signature: str = ""
    data: str = ""  # redacted_thinking

    def thinking_detail(self) -> dict[str, Any] | None:
        if self.type == "thinking":
            return {"type": "thinking", "thinking": "".join(self.parts), "signature": self.signature}
        if self.type == "redacted_thinking":
            return {"type": "redacted_thinking", "data": self.data}
        return None


@dataclass
class _TurnState:
    """Everything learned from the events of one turn."""

    blocks: dict[int, _Block] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)  # Anthropic's own names
    stop_reason: str | None = None
    response_id: str | None = None
    finished: bool = False

    @classmethod
    def from_message(cls, message: Any) -> _TurnState:
        """The state of a non-streamed ``Message``."""
        state = cls(response_id=_field(message, "id"), finished=True)
        for index, block in enumerate(_field(message, "content") or ()):
            state._start(index, block)
            slot = state.blocks[index]
            if slot.type == "tool_use":
                slot.parts = [json.dumps(_field(block, "input") or {}, ensure_ascii=False)]
            elif slot.type in ("text", "thinking"):
                slot.parts = [_field(block, slot.type) or ""]
        state._set_usage(_field(message, "usage"))
        state.stop_reason = _field(message, "stop_reason")
        return state

    def consume(self, event: Any) -> Iterator[TextDelta | ReasoningDelta]:
        """Apply one stream event, yielding the deltas worth forwarding at once."""
        match _field(event, "type"):
            case "message_start":
                message = _field(event, "message")
                self.response_id = _field(message, "id")
                self._set_usage(_field(message, "usage"))
            case "content_block_start":
                index, block = int(_field(event, "index") or 0), _field(event, "content_block")
                self._start(index, block)
                # Start blocks normally carry empty text; keep it if one does not.
                yield from self._delta(
                    self.blocks[index], _field(block, "text") or _field(block, "thinking") or ""
                )
            case "content_block_delta":
                yield from self._apply_delta(int(_field(event, "index") or 0), _field(event, "delta"))
            case "message_delta":
                reason = _field(_field(event, "delta"), "stop_reason")
                if reason:
                    self.stop_reason = reason
                self._set_usage(_field(event, "usage"))
            case "message_stop":
                self.finished = True
            case _:
                pass  # content_block_stop, ping and event types added later

    def _start(self, index: int, block: Any) -> None:
        kind = str(_field(block, "type") or "")
        self.blocks[index] = _Block(
            type=kind,
            id=str(_field(block, "id") or ""),
            name=str(_field(block, "name") or ""),
            signature=str(_field(block, "signature") or ""),
            data=str(_field(block, "data") or ""),
        )

    def _apply_delta(self, index: int, delta: Any) -> Iterator[TextDelta | ReasoningDelta]:
        block = self.blocks.get(index)
        if block is None:
            logger.debug("Delta for unknown content block %s; ignoring it", index)
            return
        match _field(delta, "type"):
            case "text_delta":
                yield from self._delta(block, _field(delta, "text") or "")
            case "thinking_delta":
                yield from self._delta(block, _field(delta, "thinking") or "")
            case "input_json_delta":
                block.parts.append(_field(delta, "partial_json") or "")
            case "signature_delta":
                block.signature += _field(delta, "signature") or ""
            case _:
                pass  # citations_delta and newer delta types

    @staticmethod
    def _delta(block: _Block, text: str) -> Iterator[TextDelta | ReasoningDelta]:
        if not text:
            return
        block.parts.append(text)
        if block.type == "text":
            yield TextDelta(text)
        elif block.type == "thinking":
            yield ReasoningDelta(text)

    def _set_usage(self, usage: Any) -> None:
        """Usage is cumulative in every event that has it: set, never add."""
        for name in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        ):
            value = _field(usage, name)
            if isinstance(value, int):
                self.usage[name] = value

    def result(self, *, where: str) -> TurnResult:
        if not self.finished:
            # The HTTP body ended cleanly but without ``message_stop``: a proxy
            # cut it short. Recording it as a complete turn would be wrong.
            raise ProviderError(
                f"{where} ended the stream before the message was complete (no message_stop)",
                retryable=True,
                kind=ErrorKind.PROTOCOL,
            )
        ordered = [self.blocks[index] for index in sorted(self.blocks)]
        details = [d for d in (block.thinking_detail() for block in ordered) if d is not None]
        calls = [
            ToolCall(id=block.id, name=block.name, arguments="".join(block.parts) or "{}")
            for block in ordered
            if block.type == "tool_use"
        ]
        if calls and details:
            first = calls[0]
            calls[0] = ToolCall(
                first.id, first.name, first.arguments, metadata={THINKING_METADATA_KEY: details}
            )
        return TurnResult(
            text="".join("".join(b.parts) for b in ordered if b.type == "text"),
            tool_calls=calls,
            finish_reason="tool_calls" if calls else _finish_reason(self.stop_reason),
            usage=self._normalised_usage(),
            reasoning="".join("".join(b.parts) for b in ordered if b.type == "thinking"),
            response_id=self.response_id,
            reasoning_details=details or None,
        )

    def _normalised_usage(self) -> dict[str, int]:
        """OpenAI-style numbers: the prompt includes cached input, which
        Anthropic counts separately from ``input_tokens``."""
        if not self.usage:
            return {}
        cached = self.usage.get("cache_read_input_tokens")
        prompt = self.usage.get("input_tokens", 0) + (cached or 0)
        prompt += self.usage.get("cache_creation_input_tokens", 0)
        completion = self.usage.get("output_tokens", 0)
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        if cached is not None:
            usage["cached_tokens"] = cached
        return usage


def _finish_reason(stop_reason: str | None) -> str:
    if stop_reason in STOP_REASONS and STOP_REASONS[stop_reason] != "tool_calls":
        return STOP_REASONS[stop_reason]
    logger.debug("Treating stop_reason %r without tool calls as 'stop'", stop_reason)
    return "stop"
