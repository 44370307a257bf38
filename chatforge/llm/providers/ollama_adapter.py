"""Adapter for Ollama's native chat API, ``POST /api/chat`` (docs/providers.md),
spoken with ``httpx`` directly.

The native API differs from Ollama's OpenAI-compatible ``/v1`` (which
``openai_compat`` serves) in ways that matter here:

* The stream is **NDJSON**: one JSON object per line, the last one with
  ``done: true``, ``done_reason`` and the token counts (``prompt_eval_count``,
  ``eval_count``). Lines are cut out of the byte stream before decoding, so a
  line split anywhere by the network (inside a key, an escape or a multi-byte
  character) is decoded whole.
* Tool-call ``arguments`` are JSON **objects** on the wire, both ways, and a
  call arrives whole in one line (several lines may each carry calls). Old
  builds send no ``id``; one is synthesised so the result can be paired.
* Thinking comes in ``message.thinking``; ``done_reason`` stays ``stop`` when
  tools are called, so calls are detected by presence.
* Errors are ``{"error": "<text>"}`` bodies; an error after the stream began is
  an ``{"error": …}`` line while the status stays 200.

Request mapping (``TurnRequest.options``):

* ``temperature`` -> ``options.temperature``; ``max_tokens`` -> ``options.num_predict``.
* ``reasoning_effort`` -> ``think``: ``"low"``/``"medium"``/``"high"`` are sent
  as those strings (gpt-oss takes levels; other thinking models treat a level
  as "on"), ``"minimal"`` as ``"low"`` (Ollama has no lower level), ``"none"``
  as ``false``. With ``think_levels=False`` every effort is sent as ``true``,
  for servers too old to accept a level. Other options (``verbosity``) are ignored.

Replaying history: an assistant turn keeps its text and its calls in one
message (that is how Ollama itself returns such a turn, and how chat templates
render it). A stored call whose arguments are not a JSON object is sent with
``{}``: the wire cannot carry anything else (a string makes Ollama answer 400,
failing the whole conversation), and the tool result that follows already
quotes the model's invalid text back to it (``tools/messages.py``). Tool
results carry ``tool_name`` and also ``tool_call_id``, which Ollama accepts.

Timeouts: ``idle_timeout_s`` is the read timeout between bytes of a stream.
Ollama sends nothing at all until the model is loaded and the prompt
evaluated, so it also bounds that wait; give a slow (CPU) server a generous
value. ``timeout_s`` bounds the whole turn; a non-streaming call has no bytes
until the end, so its read timeout is ``timeout_s``.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, assert_never

import httpx

from chatforge.llm.providers.base import (
    ChatMessage,
    ErrorKind,
    ProviderError,
    ReasoningDelta,
    StreamItem,
    TextDelta,
    ToolCall,
    TurnRequest,
    TurnResult,
)
from chatforge.llm.providers.failures import logged_failure
from chatforge.llm.providers.images import data_url_parts
from chatforge.llm.providers.retry_hints import retry_after_from_headers
from chatforge.llm.providers.sampling import json_output, stop_sequences
from tools.formats import to_openai

logger = logging.getLogger(__name__)

CHAT_PATH = "/api/chat"
EMPTY_ARGUMENTS = "{}"
# reasoning_effort -> think, when the server accepts levels.
THINK_LEVELS: dict[str, str | bool] = {
    "none": False,
    "minimal": "low",
    "low": "low",
    "medium": "medium",
    "high": "high",
}
SUPPORTED_OPTIONS = frozenset({"temperature", "max_tokens", "reasoning_effort", "top_p", "stop", "seed",
                               "presence_penalty", "frequency_penalty", "response_format"})
MAX_DETAIL_CHARS = 500


class OllamaProvider:
    """``ChatProvider`` for an Ollama server (local, or ollama.com with an API key)."""

    name = "ollama"

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        timeout_s: float = 600.0,
        idle_timeout_s: float = 60.0,
        connect_timeout_s: float = 5.0,
        think_levels: bool = True,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = server_root(base_url)
        self.timeout_s = timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.think_levels = think_levels
        headers = {"Accept": "application/x-ndjson, application/json"}
        if api_key:
            # Only ollama.com (cloud models) wants a key; a local server ignores it.
            headers["Authorization"] = f"Bearer {api_key}"
        self._connect_timeout_s = min(connect_timeout_s, timeout_s)
        self._client = httpx.Client(base_url=self.base_url, headers=headers, transport=transport)

    def close(self) -> None:
        self._client.close()

    # -- the interface ----------------------------------------------------------

    def stream_turn(self, request: TurnRequest) -> Iterator[StreamItem]:
        body = request_body(request, think_levels=self.think_levels)
        if request.stream:
            yield from self._stream(request, body)
        else:
            yield from self._complete(request, body)

    # -- streaming ----------------------------------------------------------------

    def _stream(self, request: TurnRequest, body: dict[str, Any]) -> Iterator[StreamItem]:
        deadline = time.monotonic() + self.timeout_s
        timeout = self._timeout(read=min(self.idle_timeout_s, self.timeout_s))
        state = _TurnState()
        lines = NdjsonLines()
        started = False
        try:
            with self._client.stream("POST", CHAT_PATH, json=body, timeout=timeout) as response:
                if response.status_code >= 400:
                    response.read()
                    raise self._status_error(response, request)
                started = True
                for data in response.iter_bytes():
                    for line in lines.feed(data):
                        yield from state.consume(self._decode(line, request))
                    if time.monotonic() > deadline:
                        raise self._logged(self._total_timeout(request), request)
                tail = lines.finish()
                if tail is not None:
                    yield from state.consume(self._decode(tail, request))
        except httpx.RequestError as exc:
            raise self._logged(self._transport_error(exc, request, started=started), request) from exc
        yield state.result(provider=self, request=request)

    # -- non-streaming --------------------------------------------------------------

    def _complete(self, request: TurnRequest, body: dict[str, Any]) -> Iterator[StreamItem]:
        try:
            response = self._client.post(CHAT_PATH, json=body, timeout=self._timeout(read=self.timeout_s))
        except httpx.RequestError as exc:
            raise self._logged(self._transport_error(exc, request, started=False), request) from exc
        if response.status_code >= 400:
            raise self._status_error(response, request)
        state = _TurnState()
        yield from state.consume(self._decode(response.content, request))
        yield state.result(provider=self, request=request)

    # -- helpers ------------------------------------------------------------------

    def _timeout(self, *, read: float) -> httpx.Timeout:
        return httpx.Timeout(self.timeout_s, connect=self._connect_timeout_s, read=read)

    def _decode(self, line: bytes, request: TurnRequest) -> dict[str, Any]:
        """One NDJSON line (or a whole non-streaming body) as a dict; an
        ``{"error": …}`` object is a failure the server reported after 200."""
        try:
            value = json.loads(line)
        except ValueError as exc:
            message = f"Ollama at {self.base_url} sent a line that is not JSON ({exc}): {_clip(line)}"
            raise self._logged(
                ProviderError(message, retryable=True, kind=ErrorKind.PROTOCOL), request
            ) from exc
        if not isinstance(value, dict):
            message = f"Ollama at {self.base_url} sent JSON that is not an object: {_clip(line)}"
            raise self._logged(ProviderError(message, retryable=True, kind=ErrorKind.PROTOCOL), request)
        if value.get("error") is not None:
            message = (
                f"Ollama at {self.base_url} failed while running model {request.model!r}: {value['error']}"
            )
            raise self._logged(ProviderError(message, retryable=True, kind=ErrorKind.SERVER), request)
        return value

    def _status_error(self, response: httpx.Response, request: TurnRequest) -> ProviderError:
        error = status_error(
            response.status_code,
            response.content,
            response.headers,
            where=f"Ollama at {self.base_url}",
            model=request.model,
        )
        return self._logged(error, request)

    def _transport_error(
        self, exc: httpx.RequestError, request: TurnRequest, *, started: bool
    ) -> ProviderError:
        where = f"Ollama at {self.base_url}"
        if isinstance(exc, httpx.ConnectError):
            message = f"Could not reach {where}: is `ollama serve` running? ({exc})"
            return ProviderError(message, retryable=True, kind=ErrorKind.CONNECTION)
        if isinstance(exc, httpx.ReadTimeout):
            waited = f"{min(self.idle_timeout_s, self.timeout_s):g} s"
            if started:
                message = f"{where} stopped sending model {request.model!r}'s answer for {waited}"
            elif request.stream:
                message = (
                    f"{where} sent nothing for {waited}: model {request.model!r} may still be loading "
                    "or evaluating a long prompt; a slow server needs a longer idle timeout"
                )
            else:
                message = f"{where} did not answer within {self.timeout_s:g} s (model {request.model!r})"
                return ProviderError(message, retryable=True, kind=ErrorKind.CONNECTION)
            return ProviderError(message, retryable=True, kind=ErrorKind.STALLED)
        if isinstance(exc, httpx.TimeoutException):
            message = f"Timed out talking to {where} ({type(exc).__name__}): {exc}"
            return ProviderError(message, retryable=True, kind=ErrorKind.CONNECTION)
        if not isinstance(exc, httpx.TransportError):  # e.g. a broken gzip body from a proxy
            message = f"{where} sent a response that could not be read: {exc}"
            return ProviderError(message, retryable=True, kind=ErrorKind.PROTOCOL)
        when = "mid-stream" if started else "before answering"
        message = f"The connection to {where} broke {when}: {exc or type(exc).__name__}"
        return ProviderError(message, retryable=True, kind=ErrorKind.CONNECTION)

    def _total_timeout(self, request: TurnRequest) -> ProviderError:
        message = (
            f"Ollama at {self.base_url} did not finish model {request.model!r}'s answer "
            f"within {self.timeout_s:g} s"
        )
        return ProviderError(message, retryable=True, kind=ErrorKind.CONNECTION)

    def _logged(self, error: ProviderError, request: TurnRequest) -> ProviderError:
        return logged_failure(error, provider=self.name, model=request.model)


def server_root(base_url: str) -> str:
    """The server's root URL: ``/api/chat`` is appended to it. A trailing
    ``/api`` (a common way to write an Ollama URL) is tolerated."""
    root = base_url.rstrip("/")
    if root.endswith("/api"):
        root = root[: -len("/api")]
    return root


# --------------------------------------------------------------------------
# Request
# --------------------------------------------------------------------------


def request_body(request: TurnRequest, *, think_levels: bool = True) -> dict[str, Any]:
    """The JSON body of ``POST /api/chat``. ``tools`` is left out when empty:
    the forced final turn must be answered in text."""
    body: dict[str, Any] = {
        "model": request.model,
        "messages": messages_to_ollama(request.messages),
        "stream": request.stream,
    }
    if request.tools:
        body["tools"] = to_openai(request.tools)
    options: dict[str, Any] = {}
    if request.options.get("temperature") is not None:
        options["temperature"] = request.options["temperature"]
    if request.options.get("max_tokens") is not None:
        options["num_predict"] = request.options["max_tokens"]
    for name in ("top_p", "seed", "presence_penalty", "frequency_penalty"):
        if request.options.get(name) is not None:
            options[name] = request.options[name]
    if request.options.get("stop") is not None:
        options["stop"] = stop_sequences(request.options["stop"])
    if options:
        body["options"] = options
    wants_json, schema, _ = json_output(request.options.get("response_format"))
    if wants_json:
        body["format"] = schema if schema is not None else "json"
    think = think_value(request.options.get("reasoning_effort"), levels=think_levels)
    if think is not None:
        body["think"] = think
    ignored = sorted(set(request.options) - SUPPORTED_OPTIONS)
    if ignored:
        logger.debug("Ignoring options the Ollama adapter does not support: %s", ignored)
    return body


def think_value(effort: Any, *, levels: bool = True) -> str | bool | None:
    """``reasoning_effort`` as Ollama's ``think`` (see the module docstring);
    ``None`` leaves ``think`` out, so the model's default applies."""
    if effort is None:
        return None
    if isinstance(effort, bool):
        return effort
    value = THINK_LEVELS.get(str(effort).lower())
    if value is None:
        logger.debug("Unknown reasoning_effort %r; sending think=true", effort)
        return True
    if isinstance(value, str) and not levels:
        return True
    return value


def messages_to_ollama(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Neutral messages in the ``/api/chat`` shape (docs/providers.md, "Vendor notes").

    A tool message without a ``name`` gets the name of the call it answers,
    because Ollama's templates key tool results by ``tool_name``.
    """
    names: dict[str, str] = {}
    converted: list[dict[str, Any]] = []
    for message in messages:
        for call in message.tool_calls:
            names[call.id] = call.name
        converted.append(message_to_ollama(message, call_names=names))
    return converted


def message_to_ollama(message: ChatMessage, *, call_names: Mapping[str, str] | None = None) -> dict[str, Any]:
    match message.role:
        case "user" if message.images:
            # Ollama takes base64 only, without the data: prefix (/v1 refuses http(s) images for it).
            images = [parts[1] for parts in map(data_url_parts, message.images) if parts is not None]
            return {"role": "user", "content": message.content or "", "images": images}
        case "system" | "user":
            return {"role": message.role, "content": message.content or ""}
        case "assistant":
            result: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
            if message.tool_calls:
                result["tool_calls"] = [_tool_call_to_ollama(call) for call in message.tool_calls]
            return result
        case "tool":
            call_id = message.tool_call_id or ""
            name = message.name or (call_names or {}).get(call_id, "")
            result = {"role": "tool", "content": message.content or "", "tool_name": name}
            if call_id:
                result["tool_call_id"] = call_id
            return result
        case _:
            assert_never(message.role)


def _tool_call_to_ollama(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "function": {"name": call.name, "arguments": arguments_object(call.arguments)}}


def arguments_object(arguments: str | None) -> dict[str, Any]:
    """A stored call's JSON text as the object Ollama requires; ``{}`` when
    it is not a JSON object (see the module docstring for why)."""
    if not arguments:
        return {}
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        logger.debug("Replaying a tool call whose arguments are not valid JSON as {}")
        return {}
    if not isinstance(value, dict):
        logger.debug("Replaying a tool call whose arguments are a JSON %s as {}", type(value).__name__)
        return {}
    return value


# --------------------------------------------------------------------------
# Response
# --------------------------------------------------------------------------


class NdjsonLines:
    """Cuts a byte stream into lines. Works on bytes so that a line is only
    decoded once complete: a network split inside a multi-byte character,
    a key or an escape never reaches the JSON parser. Blank lines are skipped;
    ``\\r\\n`` is accepted."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer.extend(data)
        if b"\n" not in data:
            return []
        *complete, rest = bytes(self._buffer).split(b"\n")
        self._buffer = bytearray(rest)
        return [line for line in (raw.strip() for raw in complete) if line]

    def finish(self) -> bytes | None:
        """The last line when the stream did not end with a newline."""
        tail = bytes(self._buffer).strip()
        self._buffer.clear()
        return tail or None


@dataclass
class _TurnState:
    """Everything learned from the lines of one turn (or the one non-streaming body)."""

    text_parts: list[str] = field(default_factory=list)
    reasoning_parts: list[str] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    done: bool = False
    done_reason: str = ""
    usage: dict[str, int] = field(default_factory=dict)

    def consume(self, line: Mapping[str, Any]) -> Iterator[TextDelta | ReasoningDelta]:
        if self.done:
            logger.debug("Ignoring an Ollama line after done: true")
            return
        message = line.get("message")
        if isinstance(message, Mapping):
            thinking = message.get("thinking")
            if isinstance(thinking, str) and thinking:
                self.reasoning_parts.append(thinking)
                yield ReasoningDelta(thinking)
            content = message.get("content")
            if isinstance(content, str) and content:
                self.text_parts.append(content)
                yield TextDelta(content)
            for raw in message.get("tool_calls") or ():
                self.tool_calls.append(self._tool_call(raw))
        if line.get("done"):
            self.done = True
            self.done_reason = str(line.get("done_reason") or "stop")
            self.usage = usage_from(line)

    def _tool_call(self, raw: Any) -> ToolCall:
        raw = raw if isinstance(raw, Mapping) else {}
        function = raw.get("function") if isinstance(raw.get("function"), Mapping) else {}
        call_id = raw.get("id") if isinstance(raw.get("id"), str) else ""
        if not call_id or any(call.id == call_id for call in self.tool_calls):
            # Before v0.12.10 calls had no id; a result must still name its call.
            call_id = f"call_{uuid.uuid4().hex[:24]}"
        return ToolCall(
            id=call_id,
            name=str(function.get("name") or ""),
            arguments=arguments_text(function.get("arguments")),
        )

    def result(self, *, provider: OllamaProvider, request: TurnRequest) -> TurnResult:
        if not self.done:
            # The body ended cleanly but without the ``done`` line: a proxy or
            # a crash cut it short; the turn is not complete.
            message = (
                f"Ollama at {provider.base_url} ended the stream before model {request.model!r} "
                "finished (no line with done: true)"
            )
            raise provider._logged(ProviderError(message, retryable=True, kind=ErrorKind.PROTOCOL), request)
        return TurnResult(
            text="".join(self.text_parts),
            tool_calls=list(self.tool_calls),
            finish_reason=finish_reason(self.done_reason, has_calls=bool(self.tool_calls)),
            usage=self.usage,
            reasoning="".join(self.reasoning_parts),
        )


def arguments_text(arguments: Any) -> str:
    """A received call's arguments as the JSON text ``ToolCall`` carries.
    Ollama sends an object; a string (a server that copies OpenAI) is kept
    verbatim, so invalid JSON still reaches the executor's error message."""
    if arguments is None or arguments == "":
        return EMPTY_ARGUMENTS
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


def finish_reason(done_reason: str, *, has_calls: bool) -> str:
    """``done_reason`` stays ``stop`` when tools are called: presence decides
    (docs/providers.md, "Vendor notes")."""
    if has_calls:
        return "tool_calls"
    if done_reason == "length":
        return "length"
    return "stop"


def usage_from(line: Mapping[str, Any]) -> dict[str, int]:
    prompt = _count(line.get("prompt_eval_count"))
    completion = _count(line.get("eval_count"))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


def error_detail(body: bytes) -> tuple[str, bool]:
    """The text of an ``{"error": "…"}`` body and whether it was one (a proxy
    or an unknown route answers with plain text instead)."""
    try:
        value = json.loads(body)
    except ValueError:
        return _clip(body), False
    if isinstance(value, dict) and value.get("error") is not None:
        error = value["error"]
        if isinstance(error, Mapping):  # tolerate the OpenAI shape from a proxy
            error = error.get("message") or json.dumps(error)
        return str(error)[:MAX_DETAIL_CHARS], True
    return _clip(body), False


def status_error(
    status: int, body: bytes, headers: Mapping[str, str] | None, *, where: str, model: str
) -> ProviderError:
    """429/5xx retry; 400, 401, 403 and 404 (model not pulled) never will
    (docs/providers.md, "Errors and retries")."""
    detail, is_ollama_error = error_detail(body)
    retry_after = retry_after_from_headers(headers)

    def error(message: str, kind: ErrorKind, retryable: bool) -> ProviderError:
        return ProviderError(
            f"{message} ({status}): {detail}",
            retryable=retryable,
            status_code=status,
            kind=kind,
            retry_after_s=retry_after if retryable else None,
        )

    if status in (400, 422):
        return error(f"{where} rejected the request for model {model!r}", ErrorKind.BAD_REQUEST, False)
    if status == 401:
        hint = "check the API key configured for this Ollama provider (ollama.com needs one)"
        return error(f"{where} rejected the API key; {hint}", ErrorKind.AUTHENTICATION, False)
    if status == 403:
        return error(
            f"{where} refused access to model {model!r} with this API key", ErrorKind.PERMISSION, False
        )
    if status == 404 and is_ollama_error:
        hint = f"run `ollama pull {model}` on that server, or check the model name"
        return error(f"{where} does not have model {model!r}; {hint}", ErrorKind.NOT_FOUND, False)
    if status == 404:
        hint = "check the base URL: it should be the server root, e.g. http://localhost:11434, without /v1"
        return error(f"{where} has no {CHAT_PATH} endpoint; {hint}", ErrorKind.NOT_FOUND, False)
    if status == 408:
        return error(f"{where} timed out the request", ErrorKind.CONNECTION, True)
    if status == 429:
        return error(f"{where} is rate limiting requests", ErrorKind.RATE_LIMIT, True)
    if status == 503:
        hint = "too many requests are queued (OLLAMA_MAX_QUEUE) or it is starting"
        return error(f"{where} is busy; {hint}", ErrorKind.OVERLOADED, True)
    if status >= 500:
        return error(f"{where} had a server error running model {model!r}", ErrorKind.SERVER, True)
    return error(f"{where} rejected the request for model {model!r}", ErrorKind.BAD_REQUEST, False)


def _clip(data: bytes | str) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    text = text.strip()
    return text if len(text) <= MAX_DETAIL_CHARS else text[:MAX_DETAIL_CHARS] + "…"
