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
from typing import Any, Literal, Protocol, TypeAlias

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ToolCall:
    """One call the model asked for. ``arguments`` is the raw JSON text the
    model produced: it may be invalid, and the tool executor reports that back
    to the model rather than the engine failing."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # role == "tool" only
    name: str | None = None  # role == "tool": the tool's name


@dataclass(frozen=True)
class TurnRequest:
    model: str
    messages: list[ChatMessage]
    # Tool specs in OpenAI function format:
    # {"type": "function", "function": {"name", "description", "parameters"}}.
    # Empty means the model must answer without tools (e.g. the forced final
    # turn after the iteration cap).
    tools: list[dict[str, Any]] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)


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
    usage: dict[str, int] = field(default_factory=dict)
    reasoning: str = ""
    response_id: str | None = None


StreamItem: TypeAlias = TextDelta | ReasoningDelta | TurnResult


class ProviderError(Exception):
    """A provider call failed. ``retryable`` says whether the same request may
    succeed later (rate limit, 5xx, connection trouble) or never will (bad
    request, bad key, unknown model)."""

    def __init__(self, message: str, *, retryable: bool, status_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.status_code = status_code


class ChatProvider(Protocol):
    """A vendor adapter. ``stream_turn`` yields text and reasoning deltas as
    they arrive and ends with exactly one ``TurnResult``. It raises
    ``ProviderError`` for failures. Closing the generator early (cancellation)
    must close the upstream connection."""

    name: str

    def stream_turn(self, request: TurnRequest) -> Iterator[StreamItem]: ...
