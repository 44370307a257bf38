"""A fake OpenAI server for tests: Chat Completions (``/v1/chat/completions``,
streamed or not) and the Responses API (``/v1/responses``) over
real HTTP on 127.0.0.1, real wire format, scripted answers.

Tests exercise the whole client stack (SDK, SSE parsing, retries,
cancellation) without reaching a real provider. Scripts are keyed by the
request's ``model`` and indexed by *round* — the number of assistant
tool-call turns after the last user message — so a scripted Chat
conversation needs no server-side state and survives client retries.

A Responses request is first turned into the equivalent Chat body (its
``instructions`` a system message, consecutive ``function_call`` items one
assistant message, ``function_call_output`` items tool messages), so the
same scripts, rounds and helpers serve both endpoints. Like OpenAI, the fake
stores every response's conversation (input plus output items) under its id,
and a request with ``previous_response_id`` continues that conversation.

    with FakeOpenAIServer() as server:
        server.add_script("fake-model", [Reply(tool_calls=[("get_time", {})]), Reply(text="It is noon.")])
        provider = OpenAICompatibleProvider(base_url=server.base_url, api_key="test")

Run standalone with ``python -m tests.fakes.openai_server --port 8089``.
"""

from __future__ import annotations

import copy
import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from tests.fakes.scripted import ClientGone, ScriptedHandler, ScriptedServer, run_standalone

logger = logging.getLogger(__name__)

Arguments: TypeAlias = dict[str, Any] | str


@dataclass
class Reply:
    """One scripted model turn, plus knobs for the ways servers misbehave.

    ``tool_calls`` are ``(name, arguments)``; a string ``arguments`` is sent
    verbatim (use it to send invalid JSON). ``finish_reason``/``usage`` are
    derived when left ``None``.
    """

    text: str = ""
    tool_calls: list[tuple[str, Arguments]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    reasoning: str = ""  # streamed in the non-standard ``delta.reasoning`` field
    delay_s: float = 0.0  # before the first byte of the response
    chunk_delay_s: float = 0.0  # between streamed chunks
    fail_status: int | None = None  # answer the first ``fail_times`` requests with this status
    fail_times: int = 1  # counted per (model, round)
    fail_code: str | None = None  # error ``code``; derived from the status when None
    fail_message: str | None = None
    retry_after_s: float | None = 0.01  # sent as ``retry-after-ms`` with failures; keeps SDK retries fast
    retry_after: str | None = None  # sent verbatim as ``retry-after`` with failures (seconds or HTTP date)
    error_mid_stream: bool = False  # some content, then an error event (``fail_code``/``fail_message``)
    error_event: Literal["error", "response.failed"] = "error"  # Responses: which event reports it
    drop_mid_stream: bool = False  # some content, then the connection is cut
    malformed_mid_stream: bool = False  # some content, then an event whose data is not JSON
    stall_s: float = 0.0  # some content, then nothing for this long, then the rest
    linger_s: float = 0.0  # after the last event, this long before the body ends (the stream stays open)
    byte_chunk_size: int | None = None  # write the stream in pieces of this many bytes (splits anywhere)
    tool_call_style: Literal["openai", "ollama"] = "openai"  # ollama: every call whole, all at index 0

    def resolved_finish_reason(self) -> str:
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"


Script: TypeAlias = Sequence[Reply] | Callable[[dict[str, Any]], Reply]


# --------------------------------------------------------------------------
# Script helpers
# --------------------------------------------------------------------------


def text_reply(text: str, **knobs: Any) -> Callable[[dict[str, Any]], Reply]:
    """A script that answers ``text`` in every round; ``knobs`` are ``Reply`` fields."""
    return lambda _body: Reply(text=text, **knobs)


def tool_then_answer(name: str, arguments: Arguments, answer: str) -> list[Reply]:
    """Round 0 asks for one tool, round 1 answers with ``answer``."""
    return [Reply(tool_calls=[(name, arguments)]), Reply(text=answer)]


def always_tool(name: str, arguments: Arguments) -> Callable[[dict[str, Any]], Reply]:
    """Asks for ``name`` whenever the request offers tools, so only the
    engine's iteration cap (a final turn without tools) ends the loop."""

    def script(body: dict[str, Any]) -> Reply:
        if body.get("tools"):
            return Reply(tool_calls=[(name, arguments)])
        return Reply(text=f"Stopping after {len(tool_results(body))} tool results.")

    return script


def echo_user() -> Callable[[dict[str, Any]], Reply]:
    """Answers with the last user message, to check what reached the model."""
    return lambda body: Reply(text=f"You said: {last_user_text(body)}")


# --------------------------------------------------------------------------
# Request inspection (also handy in tests)
# --------------------------------------------------------------------------


def _messages_after_last_user(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages") or []
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return messages[last_user + 1 :]


def round_of(body: dict[str, Any]) -> int:
    """Assistant tool-call turns since the last user message."""
    after = _messages_after_last_user(body)
    return sum(1 for m in after if m.get("role") == "assistant" and m.get("tool_calls"))


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in _messages_after_last_user(body) if m.get("role") == "tool"]


def content_text(content: Any) -> str:
    """Content is a string or an array of text parts."""
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def last_user_text(body: dict[str, Any]) -> str:
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    return content_text(users[-1].get("content")) if users else ""


def tool_pairing_error(messages: list[dict[str, Any]]) -> str | None:
    """The 400 OpenAI gives when tool results do not match the calls, so a
    client sending a malformed tool round fails here as it would in production."""
    pending: set[str] = set()
    for message in messages:
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                    "message with 'tool_calls'."
                )
            pending.discard(call_id)
            continue
        if pending:
            return _unanswered(pending)
        if role == "assistant":
            pending = {str(call.get("id")) for call in message.get("tool_calls") or []}
    return _unanswered(pending) if pending else None


def _unanswered(pending: set[str]) -> str:
    return (
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        "'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(sorted(pending))
    )


# --------------------------------------------------------------------------
# Wire format
# --------------------------------------------------------------------------

_ERROR_SHAPES: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Bad request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Access denied."),
    404: ("invalid_request_error", "model_not_found", "Not found."),
    408: ("server_error", None, "Request timed out."),
    409: ("server_error", None, "Conflict, please retry."),
    422: ("invalid_request_error", None, "Unprocessable entity."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again shortly."),
}


def error_body(status: int, *, code: str | None = None, message: str | None = None) -> dict[str, Any]:
    """``{"error": {"message", "type", "param", "code"}}`` for an HTTP status."""
    kind, default_code, default_message = _ERROR_SHAPES.get(
        status, ("server_error", None, "The server had an error while processing your request.")
    )
    if code == "insufficient_quota":
        kind = "insufficient_quota"
        default_message = "You exceeded your current quota, please check your plan and billing details."
    return {
        "error": {
            "message": message or default_message,
            "type": kind,
            "param": None,
            "code": code or default_code,
        }
    }


def _word_pieces(text: str) -> list[str]:
    """Words with their trailing spaces: several content chunks that join back exactly."""
    return re.findall(r"\S+\s*|\s+", text)


# Deliberately irregular so pieces end mid-key, mid-value and mid-escape.
_ARGUMENT_PIECE_SIZES = (3, 5, 2, 7, 4, 1, 6)


def _awkward_pieces(arguments: str) -> list[str]:
    pieces: list[str] = []
    position = 0
    step = 0
    while position < len(arguments):
        size = _ARGUMENT_PIECE_SIZES[step % len(_ARGUMENT_PIECE_SIZES)]
        pieces.append(arguments[position : position + size])
        position += size
        step += 1
    return pieces


def _arguments_text(arguments: Arguments) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _rough_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


@dataclass(frozen=True)
class _Turn:
    """A reply made concrete for one request: ids fixed, usage computed."""

    reply: Reply
    model: str
    completion_id: str
    created: int
    calls: list[tuple[str, str, str]]  # (id, name, arguments JSON text)
    usage: dict[str, Any]

    @classmethod
    def build(cls, reply: Reply, body: dict[str, Any]) -> _Turn:
        calls = [
            (f"call_{uuid.uuid4().hex[:24]}", name, _arguments_text(args)) for name, args in reply.tool_calls
        ]
        return cls(
            reply=reply,
            model=str(body.get("model")),
            completion_id=f"chatcmpl-{uuid.uuid4().hex[:24]}",
            created=int(time.time()),
            calls=calls,
            usage=reply.usage if reply.usage is not None else cls._usage(reply, body, calls),
        )

    @staticmethod
    def _usage(reply: Reply, body: dict[str, Any], calls: list[tuple[str, str, str]]) -> dict[str, Any]:
        prompt = sum(_rough_tokens(content_text(m.get("content"))) + 4 for m in body.get("messages") or [])
        completion = _rough_tokens(reply.text) + _rough_tokens(reply.reasoning)
        completion += sum(_rough_tokens(name + args) for _, name, args in calls)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "completion_tokens_details": {"reasoning_tokens": _rough_tokens(reply.reasoning)},
        }

    def completion(self) -> dict[str, Any]:
        """The non-streaming ``chat.completion`` object."""
        message: dict[str, Any] = {"role": "assistant", "content": self.reply.text or None, "refusal": None}
        if self.reply.reasoning:
            message["reasoning"] = self.reply.reasoning  # the non-standard field, as in streamed deltas
        if self.calls:
            message["tool_calls"] = [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
                for call_id, name, args in self.calls
            ]
        return {
            "id": self.completion_id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": self.reply.resolved_finish_reason(),
                }
            ],
            "usage": self.usage,
        }

    def chunks(self, *, include_usage: bool) -> Iterator[dict[str, Any]]:
        """The streamed ``chat.completion.chunk``s, in order, without ``[DONE]``."""
        opens_with_call = bool(self.calls) and not self.reply.text
        yield self._chunk({"role": "assistant", "content": None if opens_with_call else ""})
        for piece in _word_pieces(self.reply.reasoning):
            yield self._chunk({"reasoning": piece})
        for piece in _word_pieces(self.reply.text):
            yield self._chunk({"content": piece})
        yield from self._tool_call_chunks()
        yield self._chunk({}, finish_reason=self.reply.resolved_finish_reason())
        if include_usage:
            yield self._envelope([], usage=self.usage)

    def partial_chunks(self) -> Iterator[dict[str, Any]]:
        """What a stream sends before it breaks: the opening and some text."""
        yield self._chunk({"role": "assistant", "content": ""})
        pieces = _word_pieces(self.reply.text or "Partial answer before the failure")
        for piece in pieces[: max(1, len(pieces) // 2)]:
            yield self._chunk({"content": piece})

    def _tool_call_chunks(self) -> Iterator[dict[str, Any]]:
        for index, (call_id, name, args) in enumerate(self.calls):
            head = {"id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
            if self.reply.tool_call_style == "ollama":
                head["function"]["arguments"] = args
                yield self._chunk({"tool_calls": [{"index": 0, **head}]})
                continue
            yield self._chunk({"tool_calls": [{"index": index, **head}]})
            for piece in _awkward_pieces(args):
                yield self._chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})

    def _chunk(self, delta: dict[str, Any], *, finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return self._envelope([choice])

    def _envelope(
        self, choices: list[dict[str, Any]], *, usage: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        envelope: dict[str, Any] = {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_fake",
            "choices": choices,
        }
        if usage is not None:
            envelope["usage"] = usage
        return envelope


# --------------------------------------------------------------------------
# Responses API
# --------------------------------------------------------------------------


def input_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A Responses request's ``input`` as a list of items (a string is one user message)."""
    raw = body.get("input")
    if raw is None:
        return []
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    return [item for item in raw if isinstance(item, dict)]


def responses_pairing_error(history: list[dict[str, Any]]) -> str | None:
    """OpenAI's 400 for outputs that answer no call, or calls left unanswered."""
    calls: list[str] = []
    answered: set[str] = set()
    for item in history:
        if item.get("type") == "function_call":
            calls.append(str(item.get("call_id")))
        elif item.get("type") == "function_call_output":
            call_id = str(item.get("call_id"))
            if call_id not in calls:
                return f"No tool call found for function call output with call_id {call_id}."
            answered.add(call_id)
    for call_id in calls:
        if call_id not in answered:
            return f"No tool output found for function call {call_id}."
    return None


def chat_view(body: dict[str, Any], history: list[dict[str, Any]]) -> dict[str, Any]:
    """The Chat Completions body equivalent to a Responses request whose whole
    conversation is ``history``: what scripts and ``round_of`` read."""
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": body["instructions"]})
    for item in history:
        kind = item.get("type", "message")
        if kind == "function_call":
            call = {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments")},
            }
            if messages and messages[-1]["role"] == "assistant":
                messages[-1].setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            messages.append(
                {"role": "tool", "tool_call_id": item.get("call_id"), "content": content_text(output)}
            )
        elif kind == "message":
            role = "system" if item.get("role") == "developer" else item.get("role")
            messages.append({"role": role, "content": content_text(item.get("content"))})
        # reasoning items and item references carry nothing a script reads
    return {
        "model": body.get("model"),
        "messages": messages,
        "tools": body.get("tools") or [],
        "stream": bool(body.get("stream")),
    }


def _unknown_previous_response(response_id: str) -> dict[str, Any]:
    body = error_body(400, code="previous_response_not_found")
    body["error"].update(
        message=f"Previous response with id '{response_id}' not found.", param="previous_response_id"
    )
    return body


@dataclass(frozen=True)
class _ResponseTurn:
    """A reply made concrete as one Responses API response."""

    reply: Reply
    body: dict[str, Any]
    response_id: str
    created_at: int
    output: list[dict[str, Any]]
    usage: dict[str, Any]

    @classmethod
    def build(cls, reply: Reply, body: dict[str, Any], view: dict[str, Any]) -> _ResponseTurn:
        output: list[dict[str, Any]] = []
        if reply.reasoning:
            item: dict[str, Any] = {
                "type": "reasoning",
                "id": f"rs_{uuid.uuid4().hex[:24]}",
                "summary": [{"type": "summary_text", "text": reply.reasoning}],
            }
            if "reasoning.encrypted_content" in (body.get("include") or []):
                item["encrypted_content"] = f"enc_{uuid.uuid4().hex}"
            output.append(item)
        if reply.text:
            output.append(
                {
                    "type": "message",
                    "id": f"msg_{uuid.uuid4().hex[:24]}",
                    "status": "completed",
                    "role": "assistant",
                    "content": [
                        {"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}
                    ],
                }
            )
        for name, args in reply.tool_calls:
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_{uuid.uuid4().hex[:24]}",
                    "call_id": f"call_{uuid.uuid4().hex[:24]}",
                    "name": name,
                    "arguments": _arguments_text(args),
                    "status": "completed",
                }
            )
        return cls(
            reply=reply,
            body=body,
            response_id=f"resp_{uuid.uuid4().hex[:24]}",
            created_at=int(time.time()),
            output=output,
            usage=reply.usage if reply.usage is not None else cls._usage(reply, view, output),
        )

    @staticmethod
    def _usage(reply: Reply, view: dict[str, Any], output: list[dict[str, Any]]) -> dict[str, Any]:
        prompt = sum(_rough_tokens(content_text(m.get("content"))) + 4 for m in view["messages"])
        reasoning = _rough_tokens(reply.reasoning)
        completion = _rough_tokens(reply.text) + reasoning
        completion += sum(
            _rough_tokens(item["name"] + item["arguments"])
            for item in output
            if item["type"] == "function_call"
        )
        return {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": prompt + completion,
        }

    @property
    def incomplete_reason(self) -> str | None:
        return {"length": "max_output_tokens", "content_filter": "content_filter"}.get(
            self.reply.resolved_finish_reason()
        )

    def response(
        self, status: str | None = None, *, output: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """The ``response`` object; final (with usage) unless ``status`` says otherwise."""
        final = status is None
        if final:
            status = "incomplete" if self.incomplete_reason else "completed"
        body = self.body
        reasoning = body.get("reasoning") or {}
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "error": None,
            "incomplete_details": {"reason": self.incomplete_reason} if status == "incomplete" else None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": str(body.get("model")),
            "output": (self.output if final else []) if output is None else output,
            "parallel_tool_calls": True,
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
            "store": body.get("store", True) is not False,
            "temperature": body.get("temperature", 1.0),
            "text": {
                "format": {"type": "text"},
                "verbosity": (body.get("text") or {}).get("verbosity", "medium"),
            },
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": self.usage if final else None,
            "metadata": {},
        }

    def events(self) -> list[dict[str, Any]]:
        """Every event of the stream in order, the terminal one last (no ``sequence_number`` yet)."""
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": self.response("in_progress")},
            {"type": "response.in_progress", "response": self.response("in_progress")},
        ]
        for index, item in enumerate(self.output):
            events.extend(self._item_events(index, item))
        terminal = "response.incomplete" if self.incomplete_reason else "response.completed"
        events.append({"type": terminal, "response": self.response()})
        return events

    def failure_event(self) -> dict[str, Any]:
        code = self.reply.fail_code or "server_error"
        message = self.reply.fail_message or "The server had an error while processing your request."
        if self.reply.error_event == "response.failed":
            response = self.response("failed", output=[])
            response["error"] = {"code": code, "message": message}
            return {"type": "response.failed", "response": response}
        return {"type": "error", "code": code, "message": message, "param": None}

    def _item_events(self, index: int, item: dict[str, Any]) -> Iterator[dict[str, Any]]:
        where = {"output_index": index, "item_id": item["id"]}
        if item["type"] == "reasoning":
            yield {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**item, "summary": []},
            }
            text = item["summary"][0]["text"]
            part = {"type": "summary_text", "text": ""}
            yield {"type": "response.reasoning_summary_part.added", **where, "summary_index": 0, "part": part}
            for piece in _word_pieces(text):
                yield {
                    "type": "response.reasoning_summary_text.delta",
                    **where,
                    "summary_index": 0,
                    "delta": piece,
                }
            yield {"type": "response.reasoning_summary_text.done", **where, "summary_index": 0, "text": text}
            part = {"type": "summary_text", "text": text}
            yield {"type": "response.reasoning_summary_part.done", **where, "summary_index": 0, "part": part}
        elif item["type"] == "message":
            opening = {**item, "status": "in_progress", "content": []}
            yield {"type": "response.output_item.added", "output_index": index, "item": opening}
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            yield {"type": "response.content_part.added", **where, "content_index": 0, "part": part}
            for piece in _word_pieces(text):
                yield {
                    "type": "response.output_text.delta",
                    **where,
                    "content_index": 0,
                    "delta": piece,
                    "logprobs": [],
                }
            yield {
                "type": "response.output_text.done",
                **where,
                "content_index": 0,
                "text": text,
                "logprobs": [],
            }
            yield {
                "type": "response.content_part.done",
                **where,
                "content_index": 0,
                "part": item["content"][0],
            }
        else:
            opening = {**item, "arguments": "", "status": "in_progress"}
            yield {"type": "response.output_item.added", "output_index": index, "item": opening}
            for piece in _awkward_pieces(item["arguments"]):
                yield {"type": "response.function_call_arguments.delta", **where, "delta": piece}
            yield {
                "type": "response.function_call_arguments.done",
                **where,
                "name": item["name"],
                "arguments": item["arguments"],
            }
        yield {"type": "response.output_item.done", "output_index": index, "item": item}


# --------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------


class FakeOpenAIServer(ScriptedServer):
    """The fake server. Thread-safe; start it once per module and ``reset()``
    between tests if startup cost matters.

    ``api_key``: when set, requests must carry ``Authorization: Bearer
    <api_key>`` or get a 401, like a real server with a wrong key.
    """

    label = "openai"
    logger = logger
    round_of = staticmethod(round_of)

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, api_key: str | None = None) -> None:
        super().__init__(host=host, port=port, api_key=api_key)
        self._stored: dict[str, list[dict[str, Any]]] = {}  # Responses: response id -> conversation items
        self._mid_character_splits = 0

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}/v1"

    def _reset_more(self) -> None:
        self._stored.clear()
        self._mid_character_splits = 0

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request body received on either endpoint (a copy), oldest first."""
        return self._recorded_copy()

    def requests_for(self, model: str) -> list[dict[str, Any]]:
        return [body for body in self.requests if body.get("model") == model]

    @property
    def mid_character_splits(self) -> int:
        """How often a ``byte_chunk_size`` stream was cut inside a UTF-8 character."""
        with self._lock:
            return self._mid_character_splits

    def stored_conversation(self, response_id: str) -> list[dict[str, Any]] | None:
        """Responses: the input and output items stored for ``response_id``."""
        with self._lock:
            items = self._stored.get(response_id)
            return copy.deepcopy(items) if items is not None else None

    # -- used by the handler ----------------------------------------------

    def _note_mid_character_split(self) -> None:
        with self._lock:
            self._mid_character_splits += 1

    def _store(self, response_id: str, items: list[dict[str, Any]]) -> None:
        with self._lock:
            self._stored[response_id] = copy.deepcopy(items)

    def _reply_for(self, body: dict[str, Any]) -> Reply | None:
        """The scripted reply, or ``None`` for an unknown model."""
        return self._scripted_reply(
            str(body.get("model")),
            body,
            lambda round_index: Reply(
                fail_status=400,
                fail_times=10**9,
                fail_code="fake_script_exhausted",
                fail_message=f"Fake script for model {body.get('model')!r} has no reply for round {round_index}",
            ),
        )

    def _should_fail(self, reply: Reply, body: dict[str, Any]) -> bool:
        return self._fails_now(reply, str(body.get("model")), body)


def _data_event(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()


def _named_events(payloads: list[dict[str, Any]], *, first_sequence: int = 0) -> list[bytes]:
    """Responses framing: ``event: <type>`` then ``data:`` with the same ``type``."""
    events = []
    for sequence, payload in enumerate(payloads, start=first_sequence):
        data = json.dumps({**payload, "sequence_number": sequence}, ensure_ascii=False)
        events.append(f"event: {payload['type']}\ndata: {data}\n\n".encode())
    return events


def _middle_of_text(payloads: list[dict[str, Any]]) -> int:
    """Where a broken stream breaks: after half of the text deltas (at least
    one), or halfway through when there is no text."""
    text_positions = [i for i, p in enumerate(payloads) if p["type"] == "response.output_text.delta"]
    if text_positions:
        return text_positions[max(0, len(text_positions) // 2 - 1)] + 1
    return max(1, (len(payloads) - 1) // 2)


class _Handler(ScriptedHandler[FakeOpenAIServer]):
    server_version = "FakeOpenAI/1.0"

    # -- routes ------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        if self.path.rstrip("/") != "/v1/models":
            self._send_unknown_url()
            return
        entry = {"object": "model", "created": int(time.time()), "owned_by": "fake"}
        data = [{"id": name, **entry} for name in self.fake.models]
        self._send_json(200, {"object": "list", "data": data})

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        route = self.path.rstrip("/")
        if route not in ("/v1/chat/completions", "/v1/responses"):
            self._send_unknown_url()
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_json(400, error_body(400, message="We could not parse the JSON body of your request."))
            return
        if not isinstance(body, dict):
            self._send_json(400, error_body(400, message="The request body must be a JSON object."))
            return
        self.fake._record(body)
        expected_key = self.fake.api_key
        if expected_key is not None and self.headers.get("Authorization") != f"Bearer {expected_key}":
            self._send_json(401, error_body(401))
            return
        if route == "/v1/responses":
            self._answer_responses(body)
        else:
            self._answer_chat(body)

    def _answer_chat(self, body: dict[str, Any]) -> None:
        pairing_error = tool_pairing_error(body.get("messages") or [])
        if pairing_error:
            self._send_json(400, error_body(400, message=pairing_error))
            return
        reply = self.fake._reply_for(body)
        if reply is None:
            model = body.get("model")
            self._send_json(404, error_body(404, message=f"The model `{model}` does not exist"))
            return
        if reply.delay_s:
            time.sleep(reply.delay_s)
        if self.fake._should_fail(reply, body):
            self._send_failure(reply)
            return
        turn = _Turn.build(reply, body)
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(turn, include_usage=include_usage)
        else:
            self._send_json(200, turn.completion())

    def _answer_responses(self, body: dict[str, Any]) -> None:
        history: list[dict[str, Any]] = []
        previous = body.get("previous_response_id")
        if previous:
            stored = self.fake.stored_conversation(str(previous))
            if stored is None:
                self._send_json(400, _unknown_previous_response(str(previous)))
                return
            history = stored
        history += input_items(body)
        pairing_error = responses_pairing_error(history)
        if pairing_error:
            self._send_json(400, error_body(400, message=pairing_error))
            return
        view = chat_view(body, history)
        reply = self.fake._reply_for(view)
        if reply is None:
            model = body.get("model")
            self._send_json(404, error_body(404, message=f"The model `{model}` does not exist"))
            return
        if reply.delay_s:
            time.sleep(reply.delay_s)
        if self.fake._should_fail(reply, view):
            self._send_failure(reply)
            return
        turn = _ResponseTurn.build(reply, body, view)
        store = body.get("store", True) is not False
        if not body.get("stream"):
            if store:
                self.fake._store(turn.response_id, history + turn.output)
            self._send_json(200, turn.response())
            return
        self._stream_response(turn, stored_history=history + turn.output if store else None)

    # -- responses -----------------------------------------------------------

    def _send_unknown_url(self) -> None:
        message = f"Unknown request URL: {self.command} {self.path}"
        self._send_json(404, error_body(404, code="unknown_url", message=message))

    def _send_failure(self, reply: Reply) -> None:
        status = reply.fail_status or 500
        headers = {}
        if reply.retry_after_s is not None:
            headers["retry-after-ms"] = str(int(reply.retry_after_s * 1000))
        if reply.retry_after is not None:
            headers["retry-after"] = reply.retry_after
        self._send_json(status, error_body(status, code=reply.fail_code, message=reply.fail_message), headers)

    def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", f"req_{uuid.uuid4().hex[:16]}")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _start_event_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", f"req_{uuid.uuid4().hex[:16]}")
        self.end_headers()

    def _stream(self, turn: _Turn, *, include_usage: bool) -> None:
        """Chat: ``data:`` events ending with ``data: [DONE]``."""
        self._start_event_stream()
        reply = turn.reply
        try:
            if reply.error_mid_stream or reply.drop_mid_stream or reply.malformed_mid_stream:
                self._send_events([_data_event(c) for c in turn.partial_chunks()], reply)
                if reply.malformed_mid_stream:
                    self._send_events([b'data: {"id": "chatcmpl-broken", "choices": [\n\n'], reply)
                    self.close_connection = True
                    self._write_http_chunk(b"")
                    return
                if reply.drop_mid_stream:
                    self.close_connection = True
                    return  # no terminating chunk: the client sees a broken body
                failure = error_body(500, code=reply.fail_code, message=reply.fail_message)
                self._send_events([_data_event(failure)], reply)
            else:
                events = [_data_event(c) for c in turn.chunks(include_usage=include_usage)]
                events.append(b"data: [DONE]\n\n")
                self._send_to_the_end(events, len(events) // 2, reply)
                return
            self._write_http_chunk(b"")
        except ClientGone:
            self.fake._note_disconnect()
            self.close_connection = True

    def _stream_response(self, turn: _ResponseTurn, *, stored_history: list[dict[str, Any]] | None) -> None:
        """Responses: ``event:`` + ``data:`` pairs with rising ``sequence_number``,
        ending with the terminal event (no ``[DONE]``)."""
        self._start_event_stream()
        reply = turn.reply
        payloads = turn.events()
        cut = _middle_of_text(payloads)
        try:
            if reply.error_mid_stream or reply.drop_mid_stream or reply.malformed_mid_stream:
                self._send_events(_named_events(payloads[:cut]), reply)
                if reply.malformed_mid_stream:
                    self._send_events([b'event: response.output_text.delta\ndata: {"type": "resp\n\n'], reply)
                    self.close_connection = True
                    self._write_http_chunk(b"")
                    return
                if reply.drop_mid_stream:
                    self.close_connection = True
                    return
                self._send_events(_named_events([turn.failure_event()], first_sequence=cut), reply)
            else:
                if stored_history is not None:
                    self.fake._store(turn.response_id, stored_history)
                self._send_to_the_end(_named_events(payloads), cut, reply)
                return
            self._write_http_chunk(b"")
        except ClientGone:
            self.fake._note_disconnect()
            self.close_connection = True

    def _send_to_the_end(self, events: list[bytes], cut: int, reply: Reply) -> None:
        """A finished stream: all ``events`` and the end of the body — with
        the last event, or ``linger_s`` after it. With ``stall_s``, silence
        for that long after ``events[:cut]``."""
        end_body = not reply.linger_s
        if reply.stall_s:
            self._send_events(events[:cut], reply)
            time.sleep(reply.stall_s)
            self._send_events(events[cut:], reply, end_body=end_body)
        else:
            self._send_events(events, reply, end_body=end_body)
        if not end_body:
            time.sleep(reply.linger_s)
            self._write_http_chunk(b"")

    def _send_events(self, events: list[bytes], reply: Reply, *, end_body: bool = False) -> None:
        """Each event as one HTTP chunk, or with ``byte_chunk_size`` the bytes
        cut into pieces of that size wherever they fall (inside a JSON key,
        an escape, a multi-byte character). ``end_body``: the last chunk
        carries the end of the body."""
        size = reply.byte_chunk_size
        if not size:
            for position, event in enumerate(events):
                if reply.chunk_delay_s and position:
                    time.sleep(reply.chunk_delay_s)
                self._write_http_chunk(event, end_body=end_body and position == len(events) - 1)
            return
        data = b"".join(events)
        for position in range(0, len(data), size):
            if reply.chunk_delay_s and position:
                time.sleep(reply.chunk_delay_s)
            end = position + size
            if end < len(data) and data[end] & 0xC0 == 0x80:  # the next piece starts mid-character
                self.fake._note_mid_character_split()
            self._write_http_chunk(data[position:end], end_body=end_body and end >= len(data))


FakeOpenAIServer.handler = _Handler


# --------------------------------------------------------------------------
# Standalone mode
# --------------------------------------------------------------------------


def demo_script(body: dict[str, Any]) -> Reply:
    """For manual runs: calls the first offered tool once, then reports the
    results; without tools it echoes the user."""
    tools = body.get("tools") or []
    if tools and round_of(body) == 0:
        name = tools[0].get("function", {}).get("name", "tool")
        return Reply(text="Let me check that. ", tool_calls=[(name, {})])
    results = tool_results(body)
    if results:
        return Reply(text="Tool results: " + "; ".join(content_text(m.get("content")) for m in results))
    return Reply(text=f"You said: {last_user_text(body)}", chunk_delay_s=0.05)


def main(argv: Sequence[str] | None = None) -> None:
    run_standalone(FakeOpenAIServer, label="OpenAI", port=8089, default_model="fake-model", script=demo_script, argv=argv)


if __name__ == "__main__":
    main()
