"""Adapter for the OpenAI Responses API (``POST /v1/responses``,
docs/providers.md) via the official SDK.

How neutral messages map to Responses ``input`` items:

* system messages -> ``instructions`` (joined; OpenAI does not carry them
  over from a previous response, so they are sent on every call);
* user -> ``{"role": "user", "content": text}``; assistant text ->
  ``{"role": "assistant", "content": text}``; each tool call ->
  ``{"type": "function_call", "call_id", "name", "arguments"}``; each tool
  result -> ``{"type": "function_call_output", "call_id", "output"}``.

With ``TurnRequest.previous_response_id`` OpenAI already holds the
conversation, so only the items after the last assistant turn are sent (the
new user message, or the outputs of the last tool round); otherwise the whole
history is. Options: ``reasoning_effort`` -> ``reasoning.effort`` (with
``reasoning.summary`` so summaries stream as ``ReasoningDelta``s),
``verbosity`` -> ``text.verbosity``, ``max_tokens`` -> ``max_output_tokens``,
``temperature`` as is.

The stream is read event by event (we do not use the SDK's accumulating
``responses.stream`` helper): text deltas are forwarded at once, function
calls are assembled per ``output_index`` and reconciled with the final
response, which is authoritative when it lists them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, assert_never

import openai

from chatforge.llm.providers._openai_client import openai_client
from chatforge.llm.providers._openai_errors import (
    error_from_event,
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
from chatforge.llm.providers.sampling import forced_tool, json_output
from tools.formats import to_openai_responses

logger = logging.getLogger(__name__)

EMPTY_ARGUMENTS = "{}"
SUPPORTED_OPTIONS = frozenset({"reasoning_effort", "verbosity", "max_tokens", "temperature", "top_p",
                               "response_format", "parallel_tool_calls", "tool_choice"})
# ``incomplete_details.reason`` -> our finish_reason.
INCOMPLETE_REASONS = {"max_output_tokens": "length", "content_filter": "content_filter"}
# Events that end a stream. ``response.done`` is what some proxies send.
TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.done"})


class OpenAIResponsesProvider:
    """``ChatProvider`` for OpenAI's Responses API.

    ``timeout_s`` bounds a whole turn; ``idle_timeout_s`` is the longest gap
    between bytes of a stream (exceeded: ``ErrorKind.STALLED``).
    ``reasoning_summary`` ("auto", "concise", "detailed" or ``None``) is sent
    with ``reasoning_effort``; set ``None`` for an organisation that may not
    request reasoning summaries.
    """

    name = "openai_responses"

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        timeout_s: float = 600.0,
        idle_timeout_s: float = 60.0,
        connect_timeout_s: float = 5.0,
        max_retries: int = 0,
        reasoning_summary: str | None = "auto",
    ) -> None:
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.reasoning_summary = reasoning_summary
        self._where = f"OpenAI Responses API at {base_url}"
        self._client, self._whole_response_timeout = openai_client(
            base_url=base_url,
            api_key=api_key,
            timeout_s=timeout_s,
            idle_timeout_s=idle_timeout_s,
            connect_timeout_s=connect_timeout_s,
            max_retries=max_retries,
        )

    def stream_turn(self, request: TurnRequest) -> Iterator[StreamItem]:
        params = request_params(request, reasoning_summary=self.reasoning_summary)
        if not request.stream:
            yield from self._complete(request, params)
            return
        deadline = time.monotonic() + self.timeout_s
        try:
            stream = self._client.responses.create(**params, stream=True)
        except openai.OpenAIError as exc:
            raise self._error(exc, request) from exc
        state = _TurnState(where=self._where)
        try:
            for event in stream:
                yield from state.consume(event)
                if state.finished:
                    break  # ignore anything after the terminal event (a proxy's stray [DONE])
                if time.monotonic() > deadline:
                    raise total_timeout_error(self._where, self.timeout_s)
            yield from state.finish()
        except openai.OpenAIError as exc:
            raise self._error(exc, request) from exc
        except ValueError as exc:  # json.JSONDecodeError: a malformed event
            error = protocol_error(self._where, f"sent a malformed stream event: {exc}")
            raise self._logged(error, request) from exc
        except ProviderError as error:
            self._logged(error, request)
            raise
        finally:
            # Runs on normal end, on error and on GeneratorExit (the caller
            # cancelled): the HTTP response must not outlive the generator.
            stream.close()
        yield state.result()

    def _complete(self, request: TurnRequest, params: dict[str, Any]) -> Iterator[StreamItem]:
        """``request.stream == False``: one response object, replayed as at
        most one reasoning delta, one text delta and the result."""
        try:
            response = self._client.responses.create(**params, timeout=self._whole_response_timeout)
        except openai.OpenAIError as exc:
            raise self._error(exc, request) from exc
        except ValueError as exc:
            raise self._logged(
                protocol_error(self._where, f"sent a malformed response: {exc}"), request
            ) from exc
        state = _TurnState(where=self._where)
        try:
            state.apply_response(response)
        except ProviderError as error:
            raise self._logged(error, request) from None
        yield from state.finish()
        yield state.result()

    def _error(self, exc: openai.OpenAIError, request: TurnRequest) -> ProviderError:
        error = provider_error_from(
            exc,
            base_url=self.base_url,
            model=request.model,
            where=self._where,
            idle_timeout_s=self.idle_timeout_s,
        )
        return self._logged(error, request)

    def _logged(self, error: ProviderError, request: TurnRequest) -> ProviderError:
        return logged_failure(error, provider=self.name, model=request.model)


# --------------------------------------------------------------------------
# Request
# --------------------------------------------------------------------------


def request_params(request: TurnRequest, *, reasoning_summary: str | None = "auto") -> dict[str, Any]:
    """The keyword arguments for ``responses.create`` (without ``stream``)."""
    instructions, items = input_for(request.messages, continuing=request.previous_response_id is not None)
    params: dict[str, Any] = {"model": request.model, "input": items}
    if instructions:
        params["instructions"] = instructions
    if request.previous_response_id:
        params["previous_response_id"] = request.previous_response_id
    if request.tools:
        params["tools"] = to_openai_responses(request.tools)
    options = request.options
    if options.get("reasoning_effort") is not None:
        reasoning = {"effort": options["reasoning_effort"]}
        if reasoning_summary:
            reasoning["summary"] = reasoning_summary
        params["reasoning"] = reasoning
    text: dict[str, Any] = {}
    if options.get("verbosity") is not None:
        text["verbosity"] = options["verbosity"]
    wants_json, schema, schema_name = json_output(options.get("response_format"))
    if wants_json:
        text["format"] = ({"type": "json_schema", "name": schema_name, "schema": schema}
                          if schema is not None else {"type": "json_object"})
    if text:
        params["text"] = text
    if options.get("top_p") is not None:
        params["top_p"] = options["top_p"]
    if request.tools:
        if options.get("parallel_tool_calls") is not None:
            params["parallel_tool_calls"] = options["parallel_tool_calls"]
        choice = options.get("tool_choice")
        if choice is not None:
            forced = forced_tool(choice)
            params["tool_choice"] = {"type": "function", "name": forced} if forced else choice
    if options.get("max_tokens") is not None:
        params["max_output_tokens"] = options["max_tokens"]
    if options.get("temperature") is not None:
        params["temperature"] = options["temperature"]
    ignored = sorted(set(options) - SUPPORTED_OPTIONS)
    if ignored:
        logger.debug("Ignoring options the OpenAI Responses adapter does not support: %s", ignored)
    return params


def input_for(messages: list[ChatMessage], *, continuing: bool = False) -> tuple[str, list[dict[str, Any]]]:
    """``(instructions, input items)`` for ``messages``. ``continuing``
    (a ``previous_response_id`` is sent): only the messages after the last
    assistant turn become items; the instructions always come from every
    system message, as OpenAI does not carry them over."""
    instructions = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    start = 0
    if continuing:
        start = max((i + 1 for i, m in enumerate(messages) if m.role == "assistant"), default=0)
    items: list[dict[str, Any]] = []
    for message in messages[start:]:
        items.extend(message_to_items(message))
    return instructions, items


def message_to_items(message: ChatMessage) -> list[dict[str, Any]]:
    """One neutral message as Responses input items (system messages go to ``instructions``)."""
    match message.role:
        case "system":
            return []
        case "user" if message.images:
            parts = [{"type": "input_text", "text": message.content}] if message.content else []
            return [{"role": "user", "content": parts + [
                {"type": "input_image", "image_url": url, "detail": "auto"} for url in message.images]}]
        case "user":
            return [{"role": "user", "content": message.content or ""}]
        case "assistant":
            items: list[dict[str, Any]] = []
            if message.content:
                items.append({"role": "assistant", "content": message.content})
            items.extend(
                {
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": call.arguments or EMPTY_ARGUMENTS,
                }
                for call in message.tool_calls
            )
            return items
        case "tool":
            return [
                {
                    "type": "function_call_output",
                    "call_id": message.tool_call_id or "",
                    "output": message.content or "",
                }
            ]
        case _:
            assert_never(message.role)


# --------------------------------------------------------------------------
# Response
# --------------------------------------------------------------------------


@dataclass
class _CallSlot:
    """One function call being assembled from stream events."""

    item_id: str = ""
    call_id: str = ""
    name: str = ""
    argument_parts: list[str] = field(default_factory=list)
    arguments: str | None = None  # the complete text, once a ``.done`` event or item gave it

    def tool_call(self) -> ToolCall:
        arguments = self.arguments if self.arguments is not None else "".join(self.argument_parts)
        return ToolCall(
            id=self.call_id or self.item_id, name=self.name, arguments=arguments or EMPTY_ARGUMENTS
        )


@dataclass
class _TurnState:
    """Everything learned from the events (or the one response) of a turn."""

    where: str
    text_parts: list[str] = field(default_factory=list)
    reasoning_parts: list[str] = field(default_factory=list)
    calls: dict[int, _CallSlot] = field(default_factory=dict)  # by output_index
    reasoning_details: list[dict[str, Any]] = field(default_factory=list)
    final_calls: list[ToolCall] | None = None
    final_text: str = ""
    final_reasoning: str = ""
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    response_id: str | None = None
    finished: bool = False

    def consume(self, event: Any) -> Iterator[TextDelta | ReasoningDelta]:
        """Apply one stream event, yielding the deltas worth forwarding at once."""
        kind = getattr(event, "type", None)
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            # A refusal is what the model said instead of an answer: show it.
            if event.delta:
                self.text_parts.append(event.delta)
                yield TextDelta(event.delta)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            if event.delta:
                self.reasoning_parts.append(event.delta)
                yield ReasoningDelta(event.delta)
        elif kind == "response.reasoning_summary_part.added":
            if self.reasoning_parts:  # summary parts are paragraphs
                self.reasoning_parts.append("\n\n")
                yield ReasoningDelta("\n\n")
        elif kind == "response.output_item.added":
            self._item(getattr(event, "output_index", None), event.item, done=False)
        elif kind == "response.function_call_arguments.delta":
            slot = self._slot(event)
            if slot is not None and event.delta:
                slot.argument_parts.append(event.delta)
        elif kind == "response.function_call_arguments.done":
            slot = self._slot(event)
            if slot is not None and isinstance(getattr(event, "arguments", None), str):
                slot.arguments = event.arguments
        elif kind == "response.output_item.done":
            self._item(getattr(event, "output_index", None), event.item, done=True)
        elif kind in ("response.created", "response.in_progress"):
            self.response_id = self.response_id or getattr(getattr(event, "response", None), "id", None)
        elif kind in TERMINAL_EVENTS:
            self.apply_response(event.response)
        elif kind == "response.failed":
            error = getattr(getattr(event, "response", None), "error", None)
            raise self._failure(getattr(error, "code", None), getattr(error, "message", None))
        elif kind == "error":
            raise self._failure(getattr(event, "code", None), getattr(event, "message", None))

    def apply_response(self, response: Any) -> None:
        """Take what the final response object says: id, status, usage, and
        its output items, which win over what the stream assembled."""
        self.response_id = getattr(response, "id", None) or self.response_id
        status = getattr(response, "status", None)
        if status == "failed":
            error = getattr(response, "error", None)
            raise self._failure(getattr(error, "code", None), getattr(error, "message", None))
        usage = getattr(response, "usage", None)
        if usage is not None:
            self.usage = _usage_dict(usage)
        output = getattr(response, "output", None) or []
        calls = [_call_from_item(item) for item in output if getattr(item, "type", None) == "function_call"]
        if calls:
            self.final_calls = calls
        reasoning = [_reasoning_detail(item) for item in output if getattr(item, "type", None) == "reasoning"]
        if reasoning:
            self.reasoning_details = reasoning
        self.final_text = "".join(
            _message_text(item) for item in output if getattr(item, "type", None) == "message"
        )
        self.final_reasoning = "\n\n".join(
            _summary_text(item)
            for item in output
            if getattr(item, "type", None) == "reasoning" and _summary_text(item)
        )
        self.finished = True
        if status == "incomplete":
            reason = getattr(getattr(response, "incomplete_details", None), "reason", None)
            self.finish_reason = INCOMPLETE_REASONS.get(str(reason), "length")
        else:
            self.finish_reason = "stop"

    def finish(self) -> Iterator[TextDelta | ReasoningDelta]:
        """After the last event: fail if the stream never finished; forward
        text and reasoning that only the final response carried (a
        non-streaming call, or a proxy that sent no deltas)."""
        if not self.finished:
            raise protocol_error(self.where, "ended the stream before the response was complete")
        if not self.reasoning_parts and self.final_reasoning:
            self.reasoning_parts.append(self.final_reasoning)
            yield ReasoningDelta(self.final_reasoning)
        if not self.text_parts and self.final_text:
            self.text_parts.append(self.final_text)
            yield TextDelta(self.final_text)

    def result(self) -> TurnResult:
        streamed = [self.calls[index].tool_call() for index in sorted(self.calls)]
        calls = self.final_calls if self.final_calls is not None else streamed
        return TurnResult(
            text="".join(self.text_parts),
            tool_calls=calls,
            finish_reason="tool_calls" if calls else self.finish_reason or "stop",
            usage=self.usage,
            reasoning="".join(self.reasoning_parts),
            response_id=self.response_id,
            reasoning_details=self.reasoning_details or None,
        )

    def _item(self, index: int | None, item: Any, *, done: bool) -> None:
        kind = getattr(item, "type", None)
        if kind == "reasoning" and done:
            detail = _reasoning_detail(item)
            self.reasoning_details = [d for d in self.reasoning_details if d["id"] != detail["id"]] + [detail]
            return
        if kind != "function_call":
            return
        key = index if isinstance(index, int) else len(self.calls)
        slot = self.calls.setdefault(key, _CallSlot())
        slot.item_id = getattr(item, "id", None) or slot.item_id
        slot.call_id = getattr(item, "call_id", None) or slot.call_id
        slot.name = getattr(item, "name", None) or slot.name
        arguments = getattr(item, "arguments", None)
        if done and isinstance(arguments, str):
            slot.arguments = arguments
        elif arguments:  # an ``added`` item that already carries arguments
            slot.argument_parts = [arguments]

    def _slot(self, event: Any) -> _CallSlot | None:
        """The call an arguments event belongs to: by ``output_index``, else by ``item_id``."""
        index = getattr(event, "output_index", None)
        if isinstance(index, int) and index in self.calls:
            return self.calls[index]
        item_id = getattr(event, "item_id", None)
        for slot in self.calls.values():
            if item_id and slot.item_id == item_id:
                return slot
        logger.debug("Arguments for an unknown function call item %r ignored", item_id)
        return None

    def _failure(self, code: str | None, message: str | None) -> ProviderError:
        return error_from_event(code=code, error_type=None, message=message, where=self.where)


def _call_from_item(item: Any) -> ToolCall:
    return ToolCall(
        id=getattr(item, "call_id", None) or getattr(item, "id", None) or "",
        name=getattr(item, "name", None) or "",
        arguments=getattr(item, "arguments", None) or EMPTY_ARGUMENTS,
    )


def _reasoning_detail(item: Any) -> dict[str, Any]:
    """A reasoning item as stored on the message: its id, plus its
    ``encrypted_content`` when OpenAI sent one (needed to replay it without
    server-side storage)."""
    detail: dict[str, Any] = {"type": "reasoning", "id": getattr(item, "id", None) or ""}
    encrypted = getattr(item, "encrypted_content", None)
    if encrypted:
        detail["encrypted_content"] = encrypted
    return detail


def _message_text(item: Any) -> str:
    parts = getattr(item, "content", None) or []
    return "".join(
        getattr(part, "text", None) or getattr(part, "refusal", None) or ""
        for part in parts
        if getattr(part, "type", None) in ("output_text", "refusal")
    )


def _summary_text(item: Any) -> str:
    return "\n\n".join(getattr(part, "text", "") or "" for part in getattr(item, "summary", None) or [])


def _usage_dict(usage: Any) -> dict[str, int]:
    prompt = int(getattr(usage, "input_tokens", None) or 0)
    completion = int(getattr(usage, "output_tokens", None) or 0)
    result = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": int(getattr(usage, "total_tokens", None) or prompt + completion),
    }
    reasoning = getattr(getattr(usage, "output_tokens_details", None), "reasoning_tokens", None)
    if reasoning is not None:
        result["reasoning_tokens"] = int(reasoning)
    cached = getattr(getattr(usage, "input_tokens_details", None), "cached_tokens", None)
    if cached is not None:
        result["cached_tokens"] = int(cached)
    return result
