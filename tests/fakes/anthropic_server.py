"""A fake Anthropic Messages API for tests: real HTTP on 127.0.0.1, real wire
format (messages, streamed events, error bodies), scripted answers.

``POST /v1/messages`` answers with server-sent events (``event:`` and ``data:``
lines, ``message_start`` … ``message_stop``) when the body says ``"stream":
true`` and with one JSON ``message`` otherwise. Errors use Anthropic's body
``{"type": "error", "error": {"type", "message"}, "request_id"}`` and a
``request-id`` header.

Scripts are keyed by the request's ``model`` and indexed by *round*: the number
of assistant messages holding ``tool_use`` blocks after the last *person's*
user message. In Anthropic's format tool results travel in user messages too,
so a person's message is a user message whose content is a string or holds at
least one ``text`` or ``image`` block; a user message made only of
``tool_result`` blocks is not one. A scripted conversation therefore needs no
server-side state and survives client retries.

The fake checks what the real API checks and a careless client gets wrong:
``max_tokens`` present, roles alternating, every ``tool_use`` answered by
``tool_result`` blocks placed first in the next user message, no empty text
blocks, ``tools`` defined when the history has tool blocks, and (with
``thinking`` enabled) a tool-use continuation starting with a thinking block.

    with FakeAnthropicServer() as server:
        server.add_script("claude-fake", [Reply(tool_calls=[("get_time", {})]), Reply(text="Noon.")])
        provider = AnthropicProvider(base_url=server.base_url, api_key="test")

Run standalone with ``python -m tests.fakes.anthropic_server --port 8090``.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from tests.fakes.scripted import ClientGone, ScriptedHandler, ScriptedServer, run_standalone

logger = logging.getLogger(__name__)

Arguments: TypeAlias = dict[str, Any] | str

# Deliberately irregular so pieces end mid-key, mid-value and mid-escape.
DEFAULT_JSON_PIECE_SIZES = (3, 5, 2, 7, 4, 1, 6)
# Byte sizes of the HTTP chunks when ``byte_split`` is on: small and uneven,
# so SSE lines and multi-byte UTF-8 characters are cut across chunks.
BYTE_SPLIT_SIZES = (1, 3, 2, 5, 4, 7)


@dataclass
class Reply:
    """One scripted model turn, plus knobs for the ways the API misbehaves.

    ``tool_calls`` are ``(name, arguments)``; a string ``arguments`` is
    streamed verbatim as ``partial_json`` (use it for exact escapes or invalid
    JSON). ``stop_reason``/``usage`` are derived when left ``None``.
    """

    text: str = ""
    tool_calls: list[tuple[str, Arguments]] = field(default_factory=list)
    thinking: str = ""  # a ``thinking`` block before the text, with a signature
    stop_reason: str | None = None
    # input_tokens, output_tokens, cache_read_input_tokens, cache_creation_input_tokens
    usage: dict[str, int] | None = None
    delay_s: float = 0.0  # before the first byte of the response
    chunk_delay_s: float = 0.0  # between streamed events
    json_piece_sizes: tuple[int, ...] = DEFAULT_JSON_PIECE_SIZES  # how partial_json is cut
    byte_split: bool = False  # write the SSE bytes in tiny HTTP chunks (cuts UTF-8 characters)
    ensure_ascii: bool = False  # False: non-ASCII travels as raw UTF-8, as the real API sends it
    fail_status: int | None = None  # answer the first ``fail_times`` requests with this status
    fail_times: int = 1  # counted per (model, round)
    fail_type: str | None = None  # ``error.type``; derived from the status when None
    fail_error_code: str | None = None  # ``error.details.error_code`` (e.g. enforced_spend_limit_reached)
    fail_message: str | None = None
    retry_after: str | None = None  # ``retry-after`` header value sent with a failure
    error_event_after_200: bool = False  # some events, then ``event: error`` and the connection closes
    error_event_type: str = "overloaded_error"
    drop_mid_stream: bool = False  # some events, then the connection is cut
    stall_s: float = 0.0  # some events, then silence for this long, then the rest
    omit_message_stop: bool = False  # the body ends cleanly but without ``message_stop``
    malformed_mid_stream: bool = False  # some events, then a ``data:`` line that is not JSON

    def resolved_stop_reason(self) -> str:
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if self.tool_calls else "end_turn"


Script: TypeAlias = Sequence[Reply] | Callable[[dict[str, Any]], Reply]


def text_reply(text: str, **knobs: Any) -> Callable[[dict[str, Any]], Reply]:
    """A script that answers ``text`` in every round; ``knobs`` are ``Reply`` fields."""
    return lambda _body: Reply(text=text, **knobs)


# --------------------------------------------------------------------------
# Request inspection (also handy in tests)
# --------------------------------------------------------------------------


def blocks_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's content as blocks: a string is one text block."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content or [] if isinstance(block, dict)]


def is_person_message(message: dict[str, Any]) -> bool:
    """A user message a person wrote, as opposed to one carrying only tool results."""
    if message.get("role") != "user":
        return False
    return any(block.get("type") in ("text", "image") for block in blocks_of(message))


def _messages_after_last_person(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages") or []
    last = max((i for i, m in enumerate(messages) if is_person_message(m)), default=-1)
    return messages[last + 1 :]


def round_of(body: dict[str, Any]) -> int:
    """Assistant ``tool_use`` turns since the last person's message."""
    return sum(
        1
        for m in _messages_after_last_person(body)
        if m.get("role") == "assistant" and any(b.get("type") == "tool_use" for b in blocks_of(m))
    )


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks since the last person's message."""
    return [
        block
        for m in _messages_after_last_person(body)
        if m.get("role") == "user"
        for block in blocks_of(m)
        if block.get("type") == "tool_result"
    ]


def last_user_text(body: dict[str, Any]) -> str:
    people = [m for m in body.get("messages") or [] if is_person_message(m)]
    if not people:
        return ""
    return "".join(b.get("text", "") for b in blocks_of(people[-1]) if b.get("type") == "text")


def thinking_enabled(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") == "enabled"


def request_error(body: dict[str, Any]) -> str | None:
    """The 400 message the real API gives for a malformed request, or None."""
    if not isinstance(body.get("max_tokens"), int):
        return "max_tokens: Field required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    has_tool_blocks = False
    for position, message in enumerate(messages):
        role = message.get("role")
        if role not in ("user", "assistant"):
            return f"messages.{position}.role: Input should be 'user' or 'assistant'"
        if position and messages[position - 1].get("role") == role:
            return f'messages.{position}: roles must alternate between "user" and "assistant"'
        blocks = blocks_of(message)
        for block in blocks:
            if block.get("type") == "text" and not str(block.get("text", "")).strip():
                return f"messages.{position}: text content blocks must contain non-whitespace text"
            if block.get("type") in ("tool_use", "tool_result"):
                has_tool_blocks = True
            if block.get("type") == "tool_use" and not isinstance(block.get("input"), dict):
                return f"messages.{position}: tool_use.input: Input should be a valid dictionary"
        problem = _tool_result_problem(messages, position)
        if problem:
            return problem
    if has_tool_blocks and not body.get("tools"):
        return "Requests which include `tool_use` or `tool_result` blocks must define tools."
    return _thinking_problem(body)


def _tool_result_problem(messages: list[dict[str, Any]], position: int) -> str | None:
    message = messages[position]
    blocks = blocks_of(message)
    if message.get("role") == "assistant":
        ids = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
        if not ids:
            return None
        following = messages[position + 1] if position + 1 < len(messages) else None
        answered = {b.get("tool_use_id") for b in blocks_of(following)} if following else set()
        missing = [i for i in ids if i not in answered]
        if missing:
            return (
                f"messages.{position + 1}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(map(str, missing))}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message."
            )
        return None
    kinds = [b.get("type") for b in blocks]
    if "tool_result" not in kinds:
        return None
    first_other = next((i for i, k in enumerate(kinds) if k != "tool_result"), len(kinds))
    if "tool_result" in kinds[first_other:]:
        return f"messages.{position}: tool_result blocks must come FIRST in the user message content"
    previous = messages[position - 1] if position else {}
    calls = {b.get("id") for b in blocks_of(previous) if b.get("type") == "tool_use"}
    for block in blocks:
        if block.get("type") == "tool_result" and block.get("tool_use_id") not in calls:
            return (
                f"messages.{position}: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding "
                "`tool_use` block in the previous message."
            )
    return None


def _thinking_problem(body: dict[str, Any]) -> str | None:
    if not thinking_enabled(body):
        return None
    budget = body["thinking"].get("budget_tokens")
    if not isinstance(budget, int) or budget < 1024:
        return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
    if body["max_tokens"] <= budget:
        return "`max_tokens` must be greater than `thinking.budget_tokens`."
    after = _messages_after_last_person(body)
    assistants = [m for m in after if m.get("role") == "assistant"]
    if assistants and any(b.get("type") == "tool_use" for b in blocks_of(assistants[-1])):
        first = blocks_of(assistants[-1])[0].get("type")
        if first not in ("thinking", "redacted_thinking"):
            return (
                f"messages.{len(body['messages']) - 2}.content.0.type: Expected `thinking` or "
                f"`redacted_thinking`, but found `{first}`. When `thinking` is enabled, a final "
                "`assistant` message must start with a thinking block."
            )
    return None


# --------------------------------------------------------------------------
# Wire format
# --------------------------------------------------------------------------

_ERROR_TYPES: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Bad request."),
    401: ("authentication_error", "invalid x-api-key"),
    402: ("billing_error", "Your credit balance is too low to access the Anthropic API."),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "Not found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit."),
    500: ("api_error", "Internal server error."),
    504: ("timeout_error", "Request timed out."),
    529: ("overloaded_error", "Overloaded"),
}


def error_body(
    status: int, *, error_type: str | None = None, message: str | None = None, error_code: str | None = None
) -> dict[str, Any]:
    """``{"type": "error", "error": {"type", "message"}, "request_id"}`` for an HTTP status."""
    default_type, default_message = _ERROR_TYPES.get(status, ("api_error", "Internal server error."))
    error: dict[str, Any] = {"type": error_type or default_type, "message": message or default_message}
    if error_code:
        error["details"] = {"error_code": error_code}
    return {"type": "error", "error": error, "request_id": f"req_{uuid.uuid4().hex[:24]}"}


def split_pieces(text: str, sizes: Sequence[int]) -> list[str]:
    """``text`` cut into consecutive pieces of the given sizes (cycled)."""
    pieces: list[str] = []
    position = 0
    step = 0
    while position < len(text):
        size = max(1, sizes[step % len(sizes)])
        pieces.append(text[position : position + size])
        position += size
        step += 1
    return pieces


def _word_pieces(text: str) -> list[str]:
    """Words with their trailing spaces: several deltas that join back exactly."""
    return re.findall(r"\S+\s*|\s+", text)


def _arguments_text(arguments: Arguments) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _arguments_object(arguments: Arguments) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    try:
        parsed = json.loads(arguments) if arguments else {}
    except ValueError:
        return {"_raw": arguments}
    return parsed if isinstance(parsed, dict) else {"_raw": arguments}


def _rough_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


@dataclass(frozen=True)
class _Turn:
    """A reply made concrete for one request: ids fixed, usage computed."""

    reply: Reply
    model: str
    message_id: str
    calls: list[tuple[str, str, Arguments]]  # (id, name, arguments as scripted)
    usage: dict[str, int]
    signature: str

    @classmethod
    def build(cls, reply: Reply, body: dict[str, Any]) -> _Turn:
        calls = [(f"toolu_01{uuid.uuid4().hex[:22]}", name, args) for name, args in reply.tool_calls]
        return cls(
            reply=reply,
            model=str(body.get("model")),
            message_id=f"msg_01{uuid.uuid4().hex[:22]}",
            calls=calls,
            usage=reply.usage if reply.usage is not None else cls._usage(reply, body, calls),
            signature=f"sig_{uuid.uuid4().hex}",
        )

    @staticmethod
    def _usage(reply: Reply, body: dict[str, Any], calls: list[tuple[str, str, Arguments]]) -> dict[str, int]:
        prompt = sum(_rough_tokens(json.dumps(m)) for m in body.get("messages") or [])
        completion = _rough_tokens(reply.text) + _rough_tokens(reply.thinking)
        completion += sum(_rough_tokens(name + _arguments_text(args)) for _, name, args in calls)
        return {
            "input_tokens": prompt,
            "output_tokens": completion,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }

    def content(self) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if self.reply.thinking:
            blocks.append({"type": "thinking", "thinking": self.reply.thinking, "signature": self.signature})
        if self.reply.text:
            blocks.append({"type": "text", "text": self.reply.text})
        for call_id, name, args in self.calls:
            blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": _arguments_object(args)})
        return blocks

    def message(self) -> dict[str, Any]:
        """The non-streaming ``message`` object."""
        return {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": self.content(),
            "stop_reason": self.reply.resolved_stop_reason(),
            "stop_sequence": None,
            "usage": self.usage,
        }

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        """The streamed ``(event, data)`` pairs, in Anthropic's order."""
        start_usage = {key: value for key, value in self.usage.items() if key != "output_tokens"}
        start_usage["output_tokens"] = 1
        message = {**self.message(), "content": [], "stop_reason": None, "usage": start_usage}
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": message})
        ]
        index = 0
        if self.reply.thinking:
            events += self._block(
                index,
                {"type": "thinking", "thinking": "", "signature": ""},
                [{"type": "thinking_delta", "thinking": piece} for piece in _word_pieces(self.reply.thinking)]
                + [{"type": "signature_delta", "signature": self.signature}],
            )
            index += 1
        if self.reply.text:
            events += self._block(
                index,
                {"type": "text", "text": ""},
                [{"type": "text_delta", "text": piece} for piece in _word_pieces(self.reply.text)],
            )
            index += 1
        for call_id, name, args in self.calls:
            pieces = split_pieces(_arguments_text(args), self.reply.json_piece_sizes)
            events += self._block(
                index,
                {"type": "tool_use", "id": call_id, "name": name, "input": {}},
                [{"type": "input_json_delta", "partial_json": piece} for piece in ["", *pieces]],
            )
            index += 1
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": self.reply.resolved_stop_reason(), "stop_sequence": None},
                    "usage": {"output_tokens": self.usage.get("output_tokens", 0)},
                },
            )
        )
        if not self.reply.omit_message_stop:
            events.append(("message_stop", {"type": "message_stop"}))
        return events

    @staticmethod
    def _block(
        index: int, start: dict[str, Any], deltas: list[dict[str, Any]]
    ) -> list[tuple[str, dict[str, Any]]]:
        events = [
            ("content_block_start", {"type": "content_block_start", "index": index, "content_block": start})
        ]
        if index == 0:
            events.append(("ping", {"type": "ping"}))
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
            for delta in deltas
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        return events


# --------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------


class FakeAnthropicServer(ScriptedServer):
    """The fake server. Thread-safe; start it once per module and ``reset()``
    between tests.

    ``api_key``: when set, requests must carry it as ``x-api-key`` or as
    ``Authorization: Bearer`` (the pinned SDK sends the latter) or get a 401.
    """

    label = "anthropic"
    logger = logger
    round_of = staticmethod(round_of)

    @property
    def base_url(self) -> str:
        """What the SDK takes as ``base_url``: it appends ``/v1/messages`` itself."""
        return f"http://{self._host}:{self.port}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every ``/v1/messages`` request body received (a copy), oldest first."""
        return self._recorded_copy()

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """The headers of those requests, lower-cased names, same order."""
        return self._headers_copy()

    def _reply_for(self, body: dict[str, Any]) -> Reply | None:
        """The scripted reply, or ``None`` for an unknown model."""
        return self._scripted_reply(
            str(body.get("model")),
            body,
            lambda round_index: Reply(
                fail_status=400,
                fail_times=10**9,
                fail_message=f"Fake script for model {body.get('model')!r} has no reply for round {round_index}",
            ),
        )

    def _should_fail(self, reply: Reply, body: dict[str, Any]) -> bool:
        return self._fails_now(reply, str(body.get("model")), body)


class _Handler(ScriptedHandler[FakeAnthropicServer]):
    server_version = "FakeAnthropic/1.0"

    # -- routes ------------------------------------------------------------

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.split("?")[0].rstrip("/") != "/v1/messages":
            self._send_json(404, error_body(404, message=f"Not found: {self.command} {self.path}"))
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_json(
                400, error_body(400, message="There was an error parsing the body of your request.")
            )
            return
        if not isinstance(body, dict):
            self._send_json(400, error_body(400, message="The request body must be a JSON object."))
            return
        self.fake._record(body, {name.lower(): value for name, value in self.headers.items()})
        self._answer(body)

    def _authorised(self) -> bool:
        key = self.fake.api_key
        if key is None:
            return True
        return self.headers.get("x-api-key") == key or self.headers.get("Authorization") == f"Bearer {key}"

    def _answer(self, body: dict[str, Any]) -> None:
        if not self._authorised():
            self._send_json(401, error_body(401))
            return
        problem = request_error(body)
        if problem:
            self._send_json(400, error_body(400, message=problem))
            return
        reply = self.fake._reply_for(body)
        if reply is None:
            self._send_json(404, error_body(404, message=f"model: {body.get('model')}"))
            return
        if reply.delay_s:
            time.sleep(reply.delay_s)
        if self.fake._should_fail(reply, body):
            self._send_failure(reply)
            return
        turn = _Turn.build(reply, body)
        if body.get("stream"):
            self._stream(turn)
        else:
            self._send_json(200, turn.message())

    # -- responses -----------------------------------------------------------

    def _send_failure(self, reply: Reply) -> None:
        status = reply.fail_status or 500
        headers = {"retry-after": reply.retry_after} if reply.retry_after is not None else {}
        payload = error_body(
            status, error_type=reply.fail_type, message=reply.fail_message, error_code=reply.fail_error_code
        )
        self._send_json(status, payload, headers)

    def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", str(payload.get("request_id") or f"req_{uuid.uuid4().hex[:24]}"))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, turn: _Turn) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", f"req_{uuid.uuid4().hex[:24]}")
        self.end_headers()
        reply = turn.reply
        events = turn.events()
        broken = (
            reply.error_event_after_200
            or reply.drop_mid_stream
            or reply.stall_s
            or reply.malformed_mid_stream
        )
        cut = max(2, len(events) // 2) if broken else len(events)
        try:
            self._send_events(events[:cut], reply, end_body=not broken)
            if reply.error_event_after_200:
                error = error_body(529, error_type=reply.error_event_type)
                error.pop("request_id")
                self._send_events([("error", error)], reply)
                self.close_connection = True
                self._write_http_chunk(b"")
                return
            if reply.malformed_mid_stream:
                self._write_http_chunk(
                    b'event: content_block_delta\ndata: {"type": "content_block_delta", "ind\n\n'
                )
                self._write_http_chunk(b"")
                return
            if reply.drop_mid_stream:
                self.close_connection = True
                return  # no terminating chunk: the client sees a broken body
            if reply.stall_s:
                time.sleep(reply.stall_s)
                self._send_events(events[cut:], reply, end_body=True)
        except ClientGone:
            self.fake._note_disconnect()
            self.close_connection = True

    def _send_events(self, events: list[tuple[str, dict[str, Any]]], reply: Reply, *, end_body: bool = False) -> None:
        """Each event as an HTTP chunk (or byte-split pieces); ``end_body``:
        the last chunk carries the end of the body, as the real API sends it."""
        for position, (name, data) in enumerate(events):
            if reply.chunk_delay_s and position:
                time.sleep(reply.chunk_delay_s)
            payload = f"event: {name}\ndata: {json.dumps(data, ensure_ascii=reply.ensure_ascii)}\n\n".encode()
            pieces = list(_byte_pieces(payload)) if reply.byte_split else [payload]
            last_event = position == len(events) - 1
            for index, piece in enumerate(pieces):
                self._write_http_chunk(piece, end_body=end_body and last_event and index == len(pieces) - 1)


FakeAnthropicServer.handler = _Handler


def _byte_pieces(data: bytes) -> Iterator[bytes]:
    position = 0
    step = 0
    while position < len(data):
        size = BYTE_SPLIT_SIZES[step % len(BYTE_SPLIT_SIZES)]
        yield data[position : position + size]
        position += size
        step += 1


# --------------------------------------------------------------------------
# Standalone mode
# --------------------------------------------------------------------------


def demo_script(body: dict[str, Any]) -> Reply:
    """For manual runs: calls the first offered tool once, then reports the
    results; without tools it echoes the user."""
    tools = body.get("tools") or []
    if tools and round_of(body) == 0:
        return Reply(text="Let me check that.", tool_calls=[(tools[0].get("name", "tool"), {})])
    results = tool_results(body)
    if results:
        outputs = [r.get("content") if isinstance(r.get("content"), str) else "" for r in results]
        return Reply(text="Tool results: " + "; ".join(outputs))
    return Reply(text=f"You said: {last_user_text(body)}", chunk_delay_s=0.05)


def main(argv: Sequence[str] | None = None) -> None:
    run_standalone(FakeAnthropicServer, label="Anthropic Messages API", port=8090, default_model="claude-fake", script=demo_script, argv=argv)


if __name__ == "__main__":
    main()
