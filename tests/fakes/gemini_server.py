"""A fake Gemini API (``generateContent`` / ``streamGenerateContent``) for
tests: real HTTP on 127.0.0.1, real wire format (contents and error bodies),
scripted answers.

Same design as ``tests.fakes.openai_server``: scripts are keyed by model name
and indexed by *round* — the number of model contents with ``functionCall``
parts after the last user content that has text — so a scripted conversation
needs no server-side state and survives client retries.

    with FakeGeminiServer(api_key="test-key") as server:
        server.add_script("gemini-fake", [Reply(tool_calls=[("get_time", {})]), Reply(text="It is noon.")])
        provider = GeminiProvider(base_url=server.base_url, api_key="test-key")

Routes: ``POST /v1beta/models/{model}:generateContent`` and
``POST /v1beta/models/{model}:streamGenerateContent?alt=sse`` (``data:`` events,
the stream ends at EOF). The key is checked in ``x-goog-api-key`` (or
``?key=``); a wrong one gets Gemini's 400 ``API_KEY_INVALID``.

Run standalone with ``python -m tests.fakes.gemini_server --port 8091``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias
from urllib.parse import parse_qs, unquote, urlsplit

from tests.fakes.scripted import ClientGone, ScriptedHandler, ScriptedServer, run_standalone

logger = logging.getLogger(__name__)

Arguments: TypeAlias = dict[str, Any]

# A real-looking signature: standard base64 with ``+`` and ``/`` in it.
SAMPLE_THOUGHT_SIGNATURE = base64.b64encode(hashlib.sha256(b"fake thought").digest() * 2).decode()


@dataclass
class Reply:
    """One scripted model turn, plus knobs for the ways the API misbehaves.

    ``tool_calls`` are ``(name, args)``: Gemini sends ``args`` as an object and
    each call whole in one chunk. ``finish_reason`` is Gemini's (``STOP``,
    ``MAX_TOKENS``, ``SAFETY`` …); ``usage`` is a ``usageMetadata`` object.
    Both are derived when left ``None``.
    """

    text: str = ""
    tool_calls: list[tuple[str, Arguments]] = field(default_factory=list)
    thought: str = ""  # streamed as ``{"text": …, "thought": true}`` parts before the answer
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    # Put on the first functionCall part only, as Gemini does for parallel calls.
    thought_signature: str | None = None
    call_ids: bool = False  # send ``functionCall.id`` (Gemini usually leaves it out)
    block_prompt: str | None = None  # no candidates, ``promptFeedback.blockReason`` = this
    delay_s: float = 0.0  # before the response starts
    chunk_delay_s: float = 0.0  # between streamed events
    fail_status: int | None = None  # answer the first ``fail_times`` requests with this status
    fail_times: int = 1  # counted per (model, round)
    fail_message: str | None = None
    fail_status_name: str | None = None  # e.g. "FAILED_PRECONDITION"; derived from the status when None
    fail_reason: str | None = None  # an ErrorInfo ``reason``, e.g. "API_KEY_INVALID"
    retry_delay: str | None = None  # a RetryInfo ``retryDelay`` like "37s"
    quota_id: str | None = None  # a QuotaFailure violation ``quotaId``; "…PerDay…" means daily quota
    error_mid_stream: bool = False  # some text, then ``data: {"error": …}`` (503 UNAVAILABLE)
    drop_mid_stream: bool = False  # some text, then the connection is cut
    stall_s: float = 0.0  # some text, then nothing for this long, then the rest
    end_without_finish: bool = False  # every event but the finishing one, then a clean EOF
    malformed_event: bool = False  # some text, then a ``data:`` line that is not JSON
    # Write every event in small irregular pieces (flushed separately), so
    # reads split inside JSON keys, escapes and multi-byte UTF-8 characters.
    hostile_splits: bool = False

    def resolved_finish_reason(self) -> str:
        return self.finish_reason if self.finish_reason is not None else "STOP"


Script: TypeAlias = Sequence[Reply] | Callable[[dict[str, Any]], Reply]


# --------------------------------------------------------------------------
# Script helpers
# --------------------------------------------------------------------------


def text_reply(text: str, **knobs: Any) -> Callable[[dict[str, Any]], Reply]:
    """A script that answers ``text`` in every round; ``knobs`` are ``Reply`` fields."""
    return lambda _body: Reply(text=text, **knobs)


def tool_then_answer(name: str, args: Arguments, answer: str) -> list[Reply]:
    """Round 0 asks for one tool, round 1 answers with ``answer``."""
    return [Reply(tool_calls=[(name, args)]), Reply(text=answer)]


# --------------------------------------------------------------------------
# Request inspection (also handy in tests)
# --------------------------------------------------------------------------


def _has_text(content: dict[str, Any]) -> bool:
    return any(isinstance(part, dict) and part.get("text") for part in content.get("parts") or [])


def _contents_after_last_user(body: dict[str, Any]) -> list[dict[str, Any]]:
    contents = body.get("contents") or []
    last_user = max(
        (i for i, c in enumerate(contents) if c.get("role", "user") == "user" and _has_text(c)), default=-1
    )
    return contents[last_user + 1 :]


def function_calls(content: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``functionCall`` parts of one content (whole parts, signature included)."""
    return [part for part in content.get("parts") or [] if isinstance(part, dict) and "functionCall" in part]


def function_responses(content: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        part["functionResponse"]
        for part in content.get("parts") or []
        if isinstance(part, dict) and "functionResponse" in part
    ]


def round_of(body: dict[str, Any]) -> int:
    """Model contents with function calls since the last user content with text."""
    return sum(1 for c in _contents_after_last_user(body) if c.get("role") == "model" and function_calls(c))


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every ``functionResponse`` since the last user text, in order."""
    return [r for c in _contents_after_last_user(body) for r in function_responses(c)]


def last_user_text(body: dict[str, Any]) -> str:
    users = [c for c in body.get("contents") or [] if c.get("role", "user") == "user" and _has_text(c)]
    if not users:
        return ""
    return "".join(part.get("text", "") for part in users[-1].get("parts") or [] if isinstance(part, dict))


def function_pairing_error(contents: list[dict[str, Any]]) -> str | None:
    """Gemini's 400 when a function-call turn is not answered by exactly as
    many function responses, so a malformed tool round fails here as it would
    in production."""
    for position, content in enumerate(contents):
        calls = function_calls(content) if content.get("role") == "model" else []
        if not calls:
            continue
        following = contents[position + 1] if position + 1 < len(contents) else None
        answered = len(function_responses(following)) if following is not None else 0
        if following is None:
            continue  # the model's own last turn; nothing to answer yet
        if answered != len(calls):
            return (
                "Please ensure that the number of function response parts is equal to the number of "
                "function call parts of the function call turn."
            )
    return None


def missing_signature_error(body: dict[str, Any]) -> str | None:
    """Gemini 3's 400 when a function call of the current turn lost its signature."""
    position = 0
    for content in _contents_after_last_user(body):
        if content.get("role") != "model":
            continue
        calls = function_calls(content)
        if calls:
            position += 1
            if not calls[0].get("thoughtSignature"):
                name = calls[0]["functionCall"].get("name")
                return (
                    f"Function call is missing a thought_signature in functionCall parts. This is required "
                    f"for tools to work correctly, and missing thought_signature may lead to degraded model "
                    f"performance. Additional data, function call `default_api:{name}` , "
                    f"position {position}. Please refer to "
                    "https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
                )
    return None


# --------------------------------------------------------------------------
# Wire format
# --------------------------------------------------------------------------

STATUS_NAMES: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_DEFAULT_MESSAGES: dict[int, str] = {
    400: "Request contains an invalid argument.",
    403: "The caller does not have permission",
    404: "Requested entity was not found.",
    429: "You exceeded your current quota, please check your plan and billing details.",
    500: (
        "An internal error has occurred. Please retry or report in "
        "https://developers.generativeai.google/guide/troubleshooting"
    ),
    503: "The model is overloaded. Please try again later.",
    504: "Deadline expired before operation could complete.",
}
API_KEY_INVALID_MESSAGE = "API key not valid. Please pass a valid API key."


def error_body(
    status: int,
    *,
    message: str | None = None,
    reason: str | None = None,
    retry_delay: str | None = None,
    quota_id: str | None = None,
    status_name: str | None = None,
) -> dict[str, Any]:
    """``{"error": {"code", "message", "status", "details": [...]}}`` as Gemini sends it."""
    details: list[dict[str, Any]] = []
    if reason is not None:
        details.append(
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"},
            }
        )
    if quota_id is not None:
        details.append(
            {
                "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                "violations": [
                    {
                        "quotaMetric": (
                            "generativelanguage.googleapis.com/generate_content_free_tier_requests"
                        ),
                        "quotaId": quota_id,
                        "quotaDimensions": {"location": "global", "model": "gemini-fake"},
                        "quotaValue": "250",
                    }
                ],
            }
        )
    if status == 429 or retry_delay is not None:
        details.append(
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay or "1s"}
        )
    error: dict[str, Any] = {
        "code": status,
        "message": message or _DEFAULT_MESSAGES.get(status, "Unknown error."),
        "status": status_name or STATUS_NAMES.get(status, "UNKNOWN"),
    }
    if details:
        error["details"] = details
    return {"error": error}


def _pieces(text: str) -> list[str]:
    """Irregular pieces that split words (and never characters: JSON text
    cannot hold half a character); they join back exactly."""
    sizes = (4, 1, 6, 3, 9, 2)
    pieces: list[str] = []
    position = 0
    step = 0
    while position < len(text):
        size = sizes[step % len(sizes)]
        pieces.append(text[position : position + size])
        position += size
        step += 1
    return pieces


# Deliberately irregular so byte pieces end mid-key, mid-escape and mid-character.
_BYTE_PIECE_SIZES = (3, 5, 2, 7, 4, 1, 6)


def _byte_pieces(data: bytes) -> list[bytes]:
    pieces: list[bytes] = []
    position = 0
    step = 0
    while position < len(data):
        size = _BYTE_PIECE_SIZES[step % len(_BYTE_PIECE_SIZES)]
        pieces.append(data[position : position + size])
        position += size
        step += 1
    return pieces


def _rough_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


@dataclass(frozen=True)
class _Turn:
    """A reply made concrete for one request: ids fixed, usage computed."""

    reply: Reply
    model: str
    response_id: str
    usage: dict[str, Any]

    @classmethod
    def build(cls, reply: Reply, body: dict[str, Any], model: str) -> _Turn:
        return cls(
            reply=reply,
            model=model,
            response_id=uuid.uuid4().hex[:22],
            usage=reply.usage if reply.usage is not None else cls._usage(reply, body),
        )

    @staticmethod
    def _usage(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        prompt = sum(_rough_tokens(json.dumps(c)) for c in body.get("contents") or [])
        candidates = _rough_tokens(reply.text) + sum(
            _rough_tokens(name + json.dumps(args)) for name, args in reply.tool_calls
        )
        thoughts = _rough_tokens(reply.thought)
        usage = {
            "promptTokenCount": prompt,
            "candidatesTokenCount": candidates,
            "totalTokenCount": prompt + candidates + thoughts,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
        }
        if thoughts:
            usage["thoughtsTokenCount"] = thoughts
        return usage

    def _call_parts(self) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        for index, (name, args) in enumerate(self.reply.tool_calls):
            call: dict[str, Any] = {"name": name, "args": args}
            if self.reply.call_ids:
                call["id"] = f"fc-{self.response_id}-{index}"
            part: dict[str, Any] = {"functionCall": call}
            if index == 0 and self.reply.thought_signature:
                part["thoughtSignature"] = self.reply.thought_signature
            parts.append(part)
        return parts

    def _envelope(
        self, parts: list[dict[str, Any]] | None, *, finish: bool, usage: dict[str, Any]
    ) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts or []}, "index": 0}
        if finish:
            candidate["finishReason"] = self.reply.resolved_finish_reason()
        return {
            "candidates": [candidate],
            "usageMetadata": usage,
            "modelVersion": self.model,
            "responseId": self.response_id,
        }

    def _blocked(self) -> dict[str, Any]:
        return {
            "promptFeedback": {"blockReason": self.reply.block_prompt},
            "usageMetadata": {
                "promptTokenCount": self.usage.get("promptTokenCount", 0),
                "totalTokenCount": 0,
            },
            "modelVersion": self.model,
            "responseId": self.response_id,
        }

    def response(self) -> dict[str, Any]:
        """The non-streaming ``GenerateContentResponse``."""
        if self.reply.block_prompt:
            return self._blocked()
        parts: list[dict[str, Any]] = []
        if self.reply.thought:
            parts.append({"text": self.reply.thought, "thought": True})
        if self.reply.text:
            parts.append({"text": self.reply.text})
        parts.extend(self._call_parts())
        return self._envelope(parts, finish=True, usage=self.usage)

    def events(self) -> Iterator[dict[str, Any]]:
        """The streamed partial responses in order. ``usageMetadata`` rides on
        every event (the prompt count at once, the rest on the last), as Gemini
        does; ``finishReason`` comes with the last content."""
        if self.reply.block_prompt:
            yield self._blocked()
            return
        early_usage = {"promptTokenCount": self.usage.get("promptTokenCount", 0)}
        pieces: list[list[dict[str, Any]]] = [
            [{"text": p, "thought": True}] for p in _pieces(self.reply.thought)
        ]
        pieces += [[{"text": p}] for p in _pieces(self.reply.text)]
        calls = self._call_parts()
        if calls:
            pieces.append(calls)  # all calls whole, in one event
        if not pieces:
            pieces.append([{"text": ""}])
        for position, parts in enumerate(pieces):
            last = position == len(pieces) - 1
            yield self._envelope(parts, finish=last, usage=self.usage if last else early_usage)

    def partial_events(self) -> Iterator[dict[str, Any]]:
        """What a stream sends before it breaks: some text."""
        pieces = _pieces(self.reply.text or "Partial answer before the failure")
        early_usage = {"promptTokenCount": self.usage.get("promptTokenCount", 0)}
        for piece in pieces[: max(1, len(pieces) // 2)]:
            yield self._envelope([{"text": piece}], finish=False, usage=early_usage)


# --------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------


_ROUTE = re.compile(
    r"^/(?P<version>v1beta|v1|v1alpha)/models/(?P<model>[^/:]+)"
    r":(?P<method>generateContent|streamGenerateContent)$"
)


@dataclass(frozen=True)
class RecordedRequest:
    method: str  # generateContent | streamGenerateContent
    model: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: dict[str, Any]


class FakeGeminiServer(ScriptedServer):
    """The fake server. Thread-safe; start it once per module and ``reset()``
    between tests.

    ``api_key``: when set, requests must carry it in ``x-goog-api-key`` (or
    ``?key=``) or get Gemini's 400 ``API_KEY_INVALID``.
    ``require_thought_signatures``: answer a function call of the current turn
    that came back without its ``thoughtSignature`` with Gemini 3's 400.
    """

    label = "gemini"
    logger = logger
    round_of = staticmethod(round_of)

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        require_thought_signatures: bool = False,
    ) -> None:
        super().__init__(host=host, port=port, api_key=api_key)
        self.require_thought_signatures = require_thought_signatures

    @property
    def base_url(self) -> str:
        """Like ``https://generativelanguage.googleapis.com``: no version (the SDK adds it)."""
        return f"http://{self._host}:{self.port}"

    @property
    def recorded(self) -> list[RecordedRequest]:
        """Every generate request received (copies), oldest first."""
        return self._recorded_copy()

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The request bodies, oldest first."""
        return [entry.body for entry in self.recorded]

    def requests_for(self, model: str) -> list[dict[str, Any]]:
        return [entry.body for entry in self.recorded if entry.model == model]

    def _reply_for(self, model: str, body: dict[str, Any]) -> Reply | None:
        """The scripted reply, or ``None`` for an unknown model."""
        return self._scripted_reply(
            model,
            body,
            lambda round_index: Reply(
                fail_status=400,
                fail_times=10**9,
                fail_message=f"Fake script for model {model!r} has no reply for round {round_index}",
            ),
        )

    def _should_fail(self, reply: Reply, model: str, body: dict[str, Any]) -> bool:
        return self._fails_now(reply, model, body)


class _Handler(ScriptedHandler[FakeGeminiServer]):
    server_version = "FakeGemini/1.0"

    # -- routes ------------------------------------------------------------

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        url = urlsplit(self.path)
        match = _ROUTE.match(unquote(url.path))
        if match is None:
            self._send_json(404, error_body(404, message=f"Unknown request URL: POST {url.path}"))
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_json(400, error_body(400, message="Invalid JSON payload received."))
            return
        if not isinstance(body, dict):
            self._send_json(
                400, error_body(400, message="Invalid JSON payload received. Expected an object.")
            )
            return
        query = parse_qs(url.query)
        entry = RecordedRequest(
            method=match["method"],
            model=match["model"],
            query=query,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        self.fake._record(entry)
        self._answer(entry)

    def _answer(self, entry: RecordedRequest) -> None:
        expected_key = self.fake.api_key
        given_key = self.headers.get("x-goog-api-key") or (entry.query.get("key") or [None])[0]
        if expected_key is not None and given_key != expected_key:
            self._send_json(400, error_body(400, message=API_KEY_INVALID_MESSAGE, reason="API_KEY_INVALID"))
            return
        body = entry.body
        problem = function_pairing_error(body.get("contents") or [])
        if problem is None and self.fake.require_thought_signatures:
            problem = missing_signature_error(body)
        if problem is not None:
            self._send_json(400, error_body(400, message=problem))
            return
        reply = self.fake._reply_for(entry.model, body)
        if reply is None:
            message = (
                f"models/{entry.model} is not found for API version v1beta, or is not supported for "
                f"{entry.method}. Call ListModels to see the list of available models and their "
                "supported methods."
            )
            self._send_json(404, error_body(404, message=message))
            return
        if reply.delay_s:
            time.sleep(reply.delay_s)
        if self.fake._should_fail(reply, entry.model, body):
            self._send_failure(reply)
            return
        turn = _Turn.build(reply, body, entry.model)
        if entry.method == "streamGenerateContent":
            self._stream(turn, sse=(entry.query.get("alt") or [""])[0] == "sse")
        else:
            self._send_json(200, turn.response())

    # -- responses -----------------------------------------------------------

    def _send_failure(self, reply: Reply) -> None:
        status = reply.fail_status or 500
        payload = error_body(
            status,
            message=reply.fail_message,
            reason=reply.fail_reason,
            retry_delay=reply.retry_delay,
            quota_id=reply.quota_id,
            status_name=reply.fail_status_name,
        )
        self._send_json(status, payload)

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        # Gemini pretty-prints its bodies, errors included.
        data = json.dumps(payload, indent=2, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, turn: _Turn, *, sse: bool) -> None:
        if not sse:
            # Without alt=sse Gemini streams a JSON array; the SDK always asks for SSE.
            events = list(turn.events())
            data = json.dumps(events, ensure_ascii=False).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        reply = turn.reply
        try:
            if reply.error_mid_stream or reply.drop_mid_stream:
                self._send_events(turn.partial_events(), reply)
                if reply.drop_mid_stream:
                    self.close_connection = True
                    return  # no terminating chunk: the client sees a broken body
                self._send_event(error_body(503), reply)
            elif reply.end_without_finish:
                self._send_events(iter(list(turn.events())[:-1]), reply)
            elif reply.malformed_event:
                self._send_events(turn.partial_events(), reply)
                self._write_http_chunk(b'data: {"candidates": [{"content": {"parts": [{"text": "cut\r\n\r\n')
            elif reply.stall_s:
                events = list(turn.events())
                half = max(1, len(events) // 2)
                self._send_events(iter(events[:half]), reply)
                time.sleep(reply.stall_s)
                self._send_events(iter(events[half:]), reply)
            else:
                self._send_events(turn.events(), reply)
            self._write_http_chunk(b"")  # EOF ends a Gemini stream; there is no [DONE]
        except ClientGone:
            self.fake._note_disconnect()
            self.close_connection = True

    def _send_events(self, payloads: Iterator[dict[str, Any]], reply: Reply) -> None:
        for position, payload in enumerate(payloads):
            if reply.chunk_delay_s and position:
                time.sleep(reply.chunk_delay_s)
            self._send_event(payload, reply)

    def _send_event(self, payload: dict[str, Any], reply: Reply) -> None:
        # Gemini writes raw UTF-8 and ends events with CRLF CRLF.
        data = f"data: {json.dumps(payload, ensure_ascii=False)}\r\n\r\n".encode()
        if not reply.hostile_splits:
            self._write_http_chunk(data)
            return
        for piece in _byte_pieces(data):
            self._write_http_chunk(piece)
            time.sleep(0.0005)  # let each piece reach the client as its own read


FakeGeminiServer.handler = _Handler


# --------------------------------------------------------------------------
# Standalone mode
# --------------------------------------------------------------------------


def demo_script(body: dict[str, Any]) -> Reply:
    """For manual runs: calls the first declared function once, then reports
    the results; without tools it echoes the user."""
    declarations = [d for tool in body.get("tools") or [] for d in tool.get("functionDeclarations") or []]
    if declarations and round_of(body) == 0:
        return Reply(
            text="Let me check that. ",
            tool_calls=[(declarations[0].get("name", "tool"), {})],
            thought_signature=SAMPLE_THOUGHT_SIGNATURE,
        )
    results = tool_results(body)
    if results:
        return Reply(text="Tool results: " + "; ".join(json.dumps(r.get("response")) for r in results))
    return Reply(text=f"You said: {last_user_text(body)}", chunk_delay_s=0.05)


def main(argv: Sequence[str] | None = None) -> None:
    run_standalone(FakeGeminiServer, label="Gemini API", port=8091, default_model="gemini-fake", script=demo_script, argv=argv)


if __name__ == "__main__":
    main()
