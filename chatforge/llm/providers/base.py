"""The provider interface: what the run engine needs from any LLM vendor.

The engine speaks only these types. Each adapter converts them to and from its
vendor's wire format, so the engine never learns a vendor's quirks. Messages
are provider-neutral: a compact stored tool round is expanded into plain
``ChatMessage`` items (assistant-with-tool-calls, then tool results) before an
adapter sees it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol, TypeAlias

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ToolCall:
    """One call the model asked for. ``arguments`` is the raw JSON text the
    model produced: it may be invalid, and the tool executor reports that back
    to the model rather than the engine failing. ``metadata`` carries what a
    provider needs back verbatim when the call is replayed (e.g. Gemini's
    ``thoughtSignature``); it is stored with the round and never interpreted."""

    id: str
    name: str
    arguments: str
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # role == "tool" only
    name: str | None = None  # role == "tool": the tool's name
    # role == "user": image URLs (base64 data: URLs, or http(s) for providers
    # that fetch them; providers/images.py).
    images: tuple[str, ...] = ()


@dataclass(frozen=True)
class TurnRequest:
    model: str
    messages: list[ChatMessage]
    # Tool specs in OpenAI function format:
    # {"type": "function", "function": {"name", "description", "parameters"}}.
    # Empty means the model must answer without tools (e.g. the forced final
    # turn after the iteration cap).
    tools: list[dict[str, Any]] = field(default_factory=list)
    # reasoning_effort, temperature, max_tokens, verbosity ... — each adapter
    # sends only what its model supports.
    options: dict[str, Any] = field(default_factory=dict)
    # OpenAI Responses API: continue from a stored response; the adapter then
    # sends only the messages after the last assistant turn.
    previous_response_id: str | None = None
    stream: bool = True


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True)
class TurnResult:
    """The whole turn once the stream has ended; always the last item."""

    text: str
    tool_calls: list[ToolCall]
    finish_reason: str  # stop | tool_calls | length | content_filter
    usage: dict[str, int] = field(default_factory=dict)  # prompt_tokens, completion_tokens, total_tokens, reasoning_tokens?
    reasoning: str = ""
    response_id: str | None = None
    # Provider reasoning blocks to keep (Anthropic thinking blocks with their
    # signatures, OpenAI reasoning items); stored on the message.
    reasoning_details: list[dict[str, Any]] | None = None


StreamItem: TypeAlias = TextDelta | ReasoningDelta | TurnResult


class ErrorKind(StrEnum):
    """Why a provider call failed: decides retrying and the message a person reads."""

    BAD_REQUEST = "bad_request"  # 400/422: our request is wrong
    AUTHENTICATION = "authentication"  # 401: bad or missing key
    PERMISSION = "permission"  # 403: the key may not use this
    NOT_FOUND = "not_found"  # 404: unknown model or endpoint
    QUOTA = "quota"  # billing / spend limit / per-day quota exhausted
    RATE_LIMIT = "rate_limit"  # 429: slow down, retry after a while
    OVERLOADED = "overloaded"  # 529 / 503 overloaded / error event after 200
    SERVER = "server"  # other 5xx
    CONNECTION = "connection"  # connect/reset/timeout
    STALLED = "stalled"  # the stream stopped sending bytes
    PROTOCOL = "protocol"  # malformed response / stream ended early
    OTHER = "other"


RETRYABLE_KINDS = frozenset(
    {ErrorKind.RATE_LIMIT, ErrorKind.OVERLOADED, ErrorKind.SERVER, ErrorKind.CONNECTION,
     ErrorKind.STALLED, ErrorKind.PROTOCOL}
)


class ProviderError(Exception):
    """A provider call failed. ``retryable`` says whether the same request may
    succeed later (rate limit, 5xx, connection trouble) or never will (bad
    request, bad key, unknown model). ``retry_after_s`` is the provider's own
    advice (Retry-After, retry-after-ms, Gemini's retryDelay), when it gave any."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status_code: int | None = None,
        kind: ErrorKind = ErrorKind.OTHER,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.status_code = status_code
        self.kind = kind
        self.retry_after_s = retry_after_s


class ChatProvider(Protocol):
    """A vendor adapter. ``stream_turn`` yields text and reasoning deltas as
    they arrive and ends with exactly one ``TurnResult``. It raises
    ``ProviderError`` for failures. Closing the generator early (cancellation)
    must close the upstream connection."""

    name: str

    def stream_turn(self, request: TurnRequest) -> Iterator[StreamItem]: ...
