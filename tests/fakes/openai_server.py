"""A fake OpenAI Chat Completions server for tests: real HTTP on 127.0.0.1,
real wire format (PROVIDERS.md §1–2.4), scripted answers.

Tests exercise the whole client stack (SDK, SSE parsing, retries,
cancellation) without reaching a real provider. Scripts are keyed by the
request's ``model`` and indexed by *round* — the number of assistant
tool-call messages after the last user message — so a scripted conversation
needs no server-side state and survives client retries.

    with FakeOpenAIServer() as server:
        server.add_script("fake-model", [Reply(tool_calls=[("get_time", {})]), Reply(text="It is noon.")])
        provider = OpenAICompatibleProvider(base_url=server.base_url, api_key="test")

Run standalone with ``python -m tests.fakes.openai_server --port 8089``.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, TypeAlias

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
    error_mid_stream: bool = False  # some content, then ``data: {"error": …}``
    drop_mid_stream: bool = False  # some content, then the connection is cut
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
    """Content is a string or an array of text parts (PROVIDERS.md §2.4)."""
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
        """The non-streaming ``chat.completion`` object (§1)."""
        message: dict[str, Any] = {"role": "assistant", "content": self.reply.text or None, "refusal": None}
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
        """The streamed chunks of §2.4, in order, without ``[DONE]``."""
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
# The server
# --------------------------------------------------------------------------


class _ClientGone(Exception):
    """The client closed the connection while we were streaming."""


class FakeOpenAIServer:
    """The fake server. Thread-safe; start it once per module and ``reset()``
    between tests if startup cost matters.

    ``api_key``: when set, requests must carry ``Authorization: Bearer
    <api_key>`` or get a 401, like a real server with a wrong key.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, api_key: str | None = None) -> None:
        self._host = host
        self._port = port
        self.api_key = api_key
        self._lock = threading.Lock()
        self._scripts: dict[str, Script] = {}
        self._failures: dict[tuple[str, int], int] = {}
        self._requests: list[dict[str, Any]] = []
        self._disconnects = 0
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        if self._httpd is not None:
            return self
        httpd = _HTTPServer((self._host, self._port), self)
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("FakeOpenAIServer is not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}/v1"

    # -- scripting and inspection -----------------------------------------

    def add_script(self, model: str, script: Script) -> None:
        with self._lock:
            self._scripts[model] = script

    def reset(self) -> None:
        with self._lock:
            self._scripts.clear()
            self._failures.clear()
            self._requests.clear()
            self._disconnects = 0

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every chat request body received (a copy), oldest first."""
        with self._lock:
            return copy.deepcopy(self._requests)

    def requests_for(self, model: str) -> list[dict[str, Any]]:
        return [body for body in self.requests if body.get("model") == model]

    @property
    def disconnects(self) -> int:
        """Streams the client abandoned before the end (cancellation)."""
        with self._lock:
            return self._disconnects

    @property
    def models(self) -> list[str]:
        with self._lock:
            return sorted(self._scripts)

    # -- used by the handler ----------------------------------------------

    def _record(self, body: dict[str, Any]) -> None:
        with self._lock:
            self._requests.append(copy.deepcopy(body))

    def _note_disconnect(self) -> None:
        with self._lock:
            self._disconnects += 1

    def _reply_for(self, body: dict[str, Any]) -> Reply | None:
        """The scripted reply, or ``None`` for an unknown model."""
        with self._lock:
            script = self._scripts.get(str(body.get("model")))
        if script is None:
            return None
        if callable(script):
            return script(body)
        round_index = round_of(body)
        if round_index >= len(script):
            model = body.get("model")
            return Reply(
                fail_status=400,
                fail_times=10**9,
                fail_code="fake_script_exhausted",
                fail_message=f"Fake script for model {model!r} has no reply for round {round_index}",
            )
        return script[round_index]

    def _should_fail(self, reply: Reply, body: dict[str, Any]) -> bool:
        if reply.fail_status is None:
            return False
        key = (str(body.get("model")), round_of(body))
        with self._lock:
            served = self._failures.get(key, 0)
            if served >= reply.fail_times:
                return False
            self._failures[key] = served + 1
            return True


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], fake: FakeOpenAIServer) -> None:
        super().__init__(address, _Handler)
        self.fake = fake

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients drop idle keep-alive connections all the time; that is not
        worth a traceback on stderr. Anything else still gets one."""
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
            logger.debug("fake openai: client %s went away", client_address)
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeOpenAI/1.0"

    @property
    def fake(self) -> FakeOpenAIServer:
        assert isinstance(self.server, _HTTPServer)
        return self.server.fake

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        logger.debug("fake openai: " + format, *args)

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
        if self.path.rstrip("/") != "/v1/chat/completions":
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
        self._answer_chat(body)

    def _answer_chat(self, body: dict[str, Any]) -> None:
        expected_key = self.fake.api_key
        if expected_key is not None and self.headers.get("Authorization") != f"Bearer {expected_key}":
            self._send_json(401, error_body(401))
            return
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

    # -- responses -----------------------------------------------------------

    def _send_unknown_url(self) -> None:
        message = f"Unknown request URL: {self.command} {self.path}"
        self._send_json(404, error_body(404, code="unknown_url", message=message))

    def _send_failure(self, reply: Reply) -> None:
        status = reply.fail_status or 500
        headers = {}
        if reply.retry_after_s is not None:
            headers["retry-after-ms"] = str(int(reply.retry_after_s * 1000))
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

    def _stream(self, turn: _Turn, *, include_usage: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", f"req_{uuid.uuid4().hex[:16]}")
        self.end_headers()
        reply = turn.reply
        try:
            if reply.error_mid_stream or reply.drop_mid_stream:
                self._send_events(turn.partial_chunks(), reply.chunk_delay_s)
                if reply.drop_mid_stream:
                    self.close_connection = True
                    return  # no terminating chunk: the client sees a broken body
                self._send_event(error_body(500))
            else:
                self._send_events(turn.chunks(include_usage=include_usage), reply.chunk_delay_s)
                self._send_raw_event("[DONE]")
            self._write_http_chunk(b"")
        except _ClientGone:
            self.fake._note_disconnect()
            self.close_connection = True

    def _send_events(self, payloads: Iterator[dict[str, Any]], delay_s: float) -> None:
        for position, payload in enumerate(payloads):
            if delay_s and position:
                time.sleep(delay_s)
            self._send_event(payload)

    def _send_event(self, payload: dict[str, Any]) -> None:
        self._send_raw_event(json.dumps(payload))

    def _send_raw_event(self, data: str) -> None:
        self._write_http_chunk(f"data: {data}\n\n".encode())

    def _write_http_chunk(self, data: bytes) -> None:
        """One HTTP/1.1 chunk; an empty ``data`` is the terminating chunk."""
        try:
            self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError) as exc:
            raise _ClientGone from exc


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
    parser = argparse.ArgumentParser(description="Run the fake OpenAI Chat Completions server.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8089)
    parser.add_argument(
        "--model", action="append", help="model name to serve (repeatable); default fake-model"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    server = FakeOpenAIServer(host=args.host, port=args.port)
    for model in args.model or ["fake-model"]:
        server.add_script(model, demo_script)
    server.start()
    print(f"Fake OpenAI server at {server.base_url} serving {', '.join(server.models)}; Ctrl-C stops it.")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
