"""A fake Ollama server for tests: real HTTP on 127.0.0.1, the native API's
real wire format, scripted answers.

``POST /api/chat`` answers with NDJSON (one JSON object per line, the last
with ``done: true``) or, for ``"stream": false``, one JSON object. Lines are
encoded the way Ollama's Go server encodes them: compact, raw UTF-8, and
``<``, ``>``, ``&`` escaped as ``\\u003c`` … (Go's ``json.Marshal``). ``GET
/api/tags`` lists the scripted models.

Scripts are keyed by the request's ``model`` and indexed by *round* — the
number of assistant messages with ``tool_calls`` after the last user message —
so a scripted conversation needs no server-side state and survives retries.

    with FakeOllamaServer() as server:
        server.add_script("qwen3", [Reply(tool_calls=[("get_time", {})]), Reply(text="It is noon.")])
        provider = OllamaProvider(base_url=server.base_url, api_key="")

Run standalone with ``python -m tests.fakes.ollama_server --port 11435``.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeAlias

from tests.fakes.scripted import ClientGone, ScriptedHandler, ScriptedServer, run_standalone

logger = logging.getLogger(__name__)

Arguments: TypeAlias = dict[str, Any] | str
VERSION = "0.12.10"
THINK_LEVELS = ("low", "medium", "high")


@dataclass
class Reply:
    """One scripted model turn, plus knobs for the ways the server misbehaves.

    ``tool_calls`` are ``(name, arguments)``; arguments go out as an object
    like Ollama sends them, or verbatim as a JSON *string* value when given as
    a ``str`` (a server bug the client should survive).
    """

    text: str = ""
    tool_calls: list[tuple[str, Arguments]] = field(default_factory=list)
    thinking: str = ""  # streamed in ``message.thinking`` before the text
    done_reason: str = "stop"  # stays "stop" with tool calls, as in Ollama
    prompt_eval_count: int | None = None  # derived from the request when None
    eval_count: int | None = None  # derived from the reply when None
    delay_s: float = 0.0  # before the first byte of the response
    chunk_delay_s: float = 0.0  # between streamed lines
    fail_status: int | None = None  # answer the first ``fail_times`` requests with this status
    fail_times: int = 1  # counted per (model, round)
    fail_message: str | None = None  # the ``error`` text; derived from the status when None
    retry_after_s: float | None = None  # sent as ``Retry-After`` with failures
    error_mid_stream: bool = False  # some lines, then ``{"error": …}`` and the end of the body
    drop_mid_stream: bool = False  # some lines, then the connection is cut
    stall_s: float = 0.0  # some lines, then nothing for this long, then the rest
    no_done: bool = False  # the body ends cleanly without the ``done: true`` line
    # How each line is written: whole, in hostile pieces (cut inside keys,
    # escapes and multi-byte characters), or one byte per write.
    split: Literal["none", "hostile", "bytes"] = "none"
    split_delay_s: float = 0.002  # between the pieces of one line, so they travel apart
    tool_call_lines: Literal["together", "separate"] = "together"  # all calls in one line, or one per line
    tool_call_ids: bool = True  # False: like builds before v0.12.10, calls have no ``id``
    tool_call_index: bool = True  # ``function.index``, as recent builds send


Script: TypeAlias = Sequence[Reply] | Callable[[dict[str, Any]], Reply]


# --------------------------------------------------------------------------
# Script helpers and request inspection
# --------------------------------------------------------------------------


def text_reply(text: str, **knobs: Any) -> Callable[[dict[str, Any]], Reply]:
    """A script that answers ``text`` in every round; ``knobs`` are ``Reply`` fields."""
    return lambda _body: Reply(text=text, **knobs)


def tool_then_answer(name: str, arguments: Arguments, answer: str) -> list[Reply]:
    """Round 0 asks for one tool, round 1 answers with ``answer``."""
    return [Reply(tool_calls=[(name, arguments)]), Reply(text=answer)]


def _messages_after_last_user(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return messages[last_user + 1 :]


def round_of(body: dict[str, Any]) -> int:
    """Assistant tool-call turns since the last user message."""
    after = _messages_after_last_user(body)
    return sum(1 for m in after if m.get("role") == "assistant" and m.get("tool_calls"))


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in _messages_after_last_user(body) if m.get("role") == "tool"]


def last_user_text(body: dict[str, Any]) -> str:
    users = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
    return str(users[-1].get("content") or "") if users else ""


def request_problem(body: dict[str, Any]) -> str | None:
    """What Ollama's Go decoder would refuse with a 400, or ``None``. Mostly
    Ollama's trap: tool-call ``arguments`` must be an object, not a string
    (docs/providers.md, "Vendor notes")."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return "json: cannot unmarshal messages: expected an array"
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("content", ""), str):
            return "json: cannot unmarshal messages: every message needs string content"
        for call in message.get("tool_calls") or []:
            arguments = (call.get("function") or {}).get("arguments") if isinstance(call, dict) else None
            if arguments is not None and not isinstance(arguments, dict):
                kind = type(arguments).__name__.replace("str", "string")
                return (
                    f"json: cannot unmarshal {kind} into Go struct field ToolCallFunction."
                    "messages.tool_calls.function.arguments of type api.ToolCallFunctionArguments"
                )
    think = body.get("think")
    if think is not None and not isinstance(think, bool) and think not in THINK_LEVELS:
        return f'invalid think value: "{think}" (must be "high", "medium", "low", true, or false)'
    if body.get("tools") is not None and not isinstance(body.get("tools"), list):
        return "json: cannot unmarshal tools: expected an array"
    return None


# --------------------------------------------------------------------------
# Wire format
# --------------------------------------------------------------------------

_ERROR_TEXTS: dict[int, str] = {
    400: "invalid request",
    401: "unauthorized",
    403: "forbidden",
    429: "too many requests, please slow down",
    500: "llama runner process has terminated: exit status 2",
    502: "bad gateway: upstream model host unavailable",
    503: "server busy, please try again.  maximum pending requests exceeded",
}
MID_STREAM_ERROR = "an error was encountered while running the model: unexpected EOF"


def not_found_message(model: str) -> str:
    return f'model "{model}" not found, try pulling it first'


def go_json(payload: Any) -> bytes:
    """JSON as Go's ``json.Marshal`` writes it: compact, raw UTF-8, HTML
    characters and the JS line separators escaped."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    for char, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escape)  # these only ever occur inside strings
    return text.encode()


_HOSTILE_KEYS = (b'"content"', b'"thinking"', b'"arguments"', b'"tool_calls"', b'"done"', b'"name"')


def hostile_cuts(line: bytes) -> list[int]:
    """Byte offsets to cut ``line`` at: inside every multi-byte character,
    right after every backslash (and inside ``\\uXXXX``), inside the main keys."""
    cuts: set[int] = set()
    for position, byte in enumerate(line):
        if byte >= 0xC0:  # the lead byte of a multi-byte UTF-8 character
            cuts.add(position + 1)
            if byte >= 0xF0:
                cuts.add(position + 2)
        elif byte == 0x5C:  # backslash
            cuts.add(position + 1)
            if line[position + 1 : position + 2] == b"u":
                cuts.add(position + 3)
    for key in _HOSTILE_KEYS:
        for match in re.finditer(re.escape(key), line):
            cuts.add(match.start() + 3)
    return sorted(cut for cut in cuts if 0 < cut < len(line))


def pieces_of(line: bytes, split: str) -> list[bytes]:
    if split == "bytes":
        return [line[i : i + 1] for i in range(len(line))]
    if split == "hostile":
        bounds = [0, *hostile_cuts(line), len(line)]
        return [line[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    return [line]


def _word_pieces(text: str) -> list[str]:
    """Words with their trailing spaces: several tokens that join back exactly."""
    return re.findall(r"\S+\s*|\s+", text)


def _rough_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


@dataclass(frozen=True)
class _Turn:
    """A reply made concrete for one request: call ids fixed, counts computed."""

    reply: Reply
    model: str
    calls: list[dict[str, Any]]
    prompt_eval_count: int
    eval_count: int

    @classmethod
    def build(cls, reply: Reply, body: dict[str, Any]) -> _Turn:
        calls = []
        for index, (name, arguments) in enumerate(reply.tool_calls):
            function: dict[str, Any] = {"name": name, "arguments": arguments}
            if reply.tool_call_index:
                function = {"index": index, **function}
            call: dict[str, Any] = {"function": function}
            if reply.tool_call_ids:
                call = {"id": f"call_{uuid.uuid4().hex[:8]}", **call}
            calls.append(call)
        prompt = sum(_rough_tokens(str(m.get("content") or "")) + 4 for m in body.get("messages") or [])
        completion = _rough_tokens(reply.text) + _rough_tokens(reply.thinking)
        completion += sum(_rough_tokens(json.dumps(call["function"])) for call in calls)
        return cls(
            reply=reply,
            model=str(body.get("model")),
            calls=calls,
            prompt_eval_count=reply.prompt_eval_count if reply.prompt_eval_count is not None else prompt,
            eval_count=reply.eval_count if reply.eval_count is not None else completion,
        )

    def _line(self, message: dict[str, Any], *, done: bool = False) -> dict[str, Any]:
        return {
            "model": self.model,
            "created_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "message": {"role": "assistant", **message},
            "done": done,
        }

    def _metrics(self) -> dict[str, Any]:
        return {
            "done_reason": self.reply.done_reason,
            "total_duration": 1_234_567,
            "load_duration": 12_345,
            "prompt_eval_count": self.prompt_eval_count,
            "prompt_eval_duration": 123_456,
            "eval_count": self.eval_count,
            "eval_duration": 234_567,
        }

    def complete(self) -> dict[str, Any]:
        """The ``"stream": false`` answer."""
        message: dict[str, Any] = {"content": self.reply.text}
        if self.reply.thinking:
            message["thinking"] = self.reply.thinking
        if self.calls:
            message["tool_calls"] = self.calls
        return {**self._line(message, done=True), **self._metrics()}

    def lines(self) -> list[dict[str, Any]]:
        """The streamed lines, ``done`` line last."""
        lines = [
            self._line({"content": "", "thinking": piece}) for piece in _word_pieces(self.reply.thinking)
        ]
        lines += [self._line({"content": piece}) for piece in _word_pieces(self.reply.text)]
        if self.calls and self.reply.tool_call_lines == "together":
            lines.append(self._line({"content": "", "tool_calls": self.calls}))
        elif self.calls:
            lines += [self._line({"content": "", "tool_calls": [call]}) for call in self.calls]
        lines.append({**self._line({"content": ""}, done=True), **self._metrics()})
        return lines


# --------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------


class FakeOllamaServer(ScriptedServer):
    """The fake server. Thread-safe; start it once per module and ``reset()``
    between tests.

    ``api_key``: when set, requests must carry ``Authorization: Bearer
    <api_key>`` or get a 401, like ollama.com with a wrong key.
    """

    label = "ollama"
    logger = logger
    round_of = staticmethod(round_of)

    @property
    def base_url(self) -> str:
        """The server root, as Ollama is configured (``http://localhost:11434``)."""
        return f"http://{self._host}:{self.port}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every ``/api/chat`` request body received (a copy), oldest first."""
        return self._recorded_copy()

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """The headers of each ``/api/chat`` request, lower-cased names, oldest first."""
        return self._headers_copy()

    def _reply_for(self, body: dict[str, Any]) -> Reply | None:
        """The scripted reply, or ``None`` for an unknown model."""

        def exhausted(round_index: int) -> Reply:
            message = f"fake script for model {body.get('model')!r} has no reply for round {round_index}"
            return Reply(fail_status=400, fail_times=10**9, fail_message=message)

        return self._scripted_reply(str(body.get("model")), body, exhausted)

    def _should_fail(self, reply: Reply, body: dict[str, Any]) -> bool:
        return self._fails_now(reply, str(body.get("model")), body)


class _Handler(ScriptedHandler[FakeOllamaServer]):
    server_version = "FakeOllama/" + VERSION

    def setup(self) -> None:
        super().setup()
        # Each write leaves at once, so a split line really arrives in pieces.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # -- routes ------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        path = self.path.rstrip("/")
        if path == "":
            self._send_text(200, "Ollama is running")
        elif path == "/api/version":
            self._send_json(200, {"version": VERSION})
        elif path == "/api/tags":
            self._send_json(200, {"models": [_tag(name) for name in self.fake.models]})
        else:
            self._send_text(404, "404 page not found")

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.rstrip("/") != "/api/chat":
            self._send_text(404, "404 page not found")  # gin's answer to an unknown route
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError as exc:
            self._send_json(400, {"error": f"invalid character in request body: {exc}"})
            return
        if not isinstance(body, dict):
            self._send_json(400, {"error": "json: cannot unmarshal request body into api.ChatRequest"})
            return
        self.fake._record(body, {name.lower(): value for name, value in self.headers.items()})
        self._answer_chat(body)

    def _answer_chat(self, body: dict[str, Any]) -> None:
        expected_key = self.fake.api_key
        if expected_key is not None and self.headers.get("Authorization") != f"Bearer {expected_key}":
            self._send_json(401, {"error": "unauthorized"})
            return
        problem = request_problem(body)
        if problem:
            self._send_json(400, {"error": problem})
            return
        reply = self.fake._reply_for(body)
        if reply is None:
            self._send_json(404, {"error": not_found_message(str(body.get("model")))})
            return
        if reply.delay_s:
            time.sleep(reply.delay_s)
        if self.fake._should_fail(reply, body):
            self._send_failure(reply)
            return
        turn = _Turn.build(reply, body)
        if body.get("stream", True):  # streaming is Ollama's default
            self._stream(turn)
        else:
            self._send_bytes(200, go_json(turn.complete()), "application/json; charset=utf-8")

    # -- responses -----------------------------------------------------------

    def _send_failure(self, reply: Reply) -> None:
        status = reply.fail_status or 500
        headers = {}
        if reply.retry_after_s is not None:
            headers["Retry-After"] = f"{reply.retry_after_s:g}"
        message = reply.fail_message or _ERROR_TEXTS.get(status, "internal server error")
        self._send_json(status, {"error": message}, headers)

    def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._send_bytes(status, go_json(payload), "application/json; charset=utf-8", headers)

    def _send_text(self, status: int, text: str) -> None:
        self._send_bytes(status, text.encode(), "text/plain; charset=utf-8")

    def _send_bytes(
        self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, turn: _Turn) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        reply = turn.reply
        lines = turn.lines()
        done_line = lines.pop()
        half = max(1, len(lines) // 2)
        try:
            if reply.error_mid_stream or reply.drop_mid_stream:
                self._send_lines(lines[:half], reply)
                if reply.drop_mid_stream:
                    self.close_connection = True
                    return  # no terminating chunk: the client sees a broken body
                self._send_line({"error": MID_STREAM_ERROR}, reply)
            elif reply.stall_s:
                self._send_lines(lines[:half], reply)
                time.sleep(reply.stall_s)
                self._send_lines([*lines[half:], done_line], reply)
            else:
                self._send_lines(lines if reply.no_done else [*lines, done_line], reply)
            self._write_http_chunk(b"")
        except ClientGone:
            self.fake._note_disconnect()
            self.close_connection = True

    def _send_lines(self, lines: Iterator[dict[str, Any]] | list[dict[str, Any]], reply: Reply) -> None:
        for position, line in enumerate(lines):
            if reply.chunk_delay_s and position:
                time.sleep(reply.chunk_delay_s)
            self._send_line(line, reply)

    def _send_line(self, payload: dict[str, Any], reply: Reply) -> None:
        pieces = pieces_of(go_json(payload) + b"\n", reply.split)
        for position, piece in enumerate(pieces):
            if position and reply.split_delay_s and reply.split == "hostile":
                time.sleep(reply.split_delay_s)
            self._write_http_chunk(piece)


FakeOllamaServer.handler = _Handler


def _tag(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "model": name,
        "modified_at": "2026-01-01T00:00:00Z",
        "size": 0,
        "digest": uuid.uuid5(uuid.NAMESPACE_URL, name).hex,
        "details": {"format": "gguf", "family": "fake", "parameter_size": "0B", "quantization_level": "F16"},
    }


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
        return Reply(text="Tool results: " + "; ".join(str(m.get("content") or "") for m in results))
    return Reply(text=f"You said: {last_user_text(body)}", chunk_delay_s=0.05)


def main(argv: Sequence[str] | None = None) -> None:
    run_standalone(FakeOllamaServer, label="Ollama", port=11435, default_model="fake-model", script=demo_script, argv=argv)


if __name__ == "__main__":
    main()
