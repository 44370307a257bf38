"""A scripted, deterministic "model" for the no-configuration embedded mode
and for tests.

It behaves like a tool-using model without any network: asked the time or
some arithmetic, it first asks for the matching tools (several at once when
the user asks several things), then answers from the tool results. Same
conversation in, same stream out — including tool call ids — so tests can
assert on exact output.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from chatforge.llm.providers._demo_catalog_intents import catalog_intents
from chatforge.llm.providers._demo_intents import Intent, detect_intents
from chatforge.llm.providers.base import (
    ChatMessage,
    StreamItem,
    TextDelta,
    ToolCall,
    TurnRequest,
    TurnResult,
)

logger = logging.getLogger(__name__)

PREAMBLE = "Let me check that."
CANNED_REPLY = (
    "I'm the ChatForge demo model. Ask me the time or some arithmetic, "
    "e.g. 'What time is it in Tokyo and what is 17*23?', or name any other tool "
    "to have me call it (e.g. 'lookup_order order_id=42')."
)
NOTHING_LEFT_REPLY = "I have no tool results to report."
# A document attached to a message, as the history gives it to models
# (orchestration/transcript/attachment_content.py).
_FILE_BLOCK = re.compile(r'<file name="(?P<name>[^"]*)" id="[^"]*" type="(?P<type>[^"]*)">\n(?P<text>.*?)\n</file>',
                         re.DOTALL)
# Tools the demo understands by their own rules (_demo_intents.py); any other
# offered tool is called when the message names it (_demo_catalog_intents.py).
BUILT_IN_INTENT_TOOLS = {"get_time", "calculator", "echo"}


@dataclass(frozen=True)
class _Conversation:
    """The part of the request the demo reasons about: the last user
    message and the tool round(s) that followed it."""

    user_text: str  # without its attached documents' text
    user_turn: int  # how many user messages precede and include it
    calls: list[ToolCall]  # asked for after the last user message
    results: list[ChatMessage]  # tool messages after the last user message
    documents: list[tuple[str, str, str]]  # (name, type, text) of its attached documents
    images: tuple[str, ...]  # its images (data URLs)

    @classmethod
    def from_messages(cls, messages: list[ChatMessage]) -> _Conversation:
        user_positions = [i for i, m in enumerate(messages) if m.role == "user"]
        last_user = user_positions[-1] if user_positions else -1
        after = messages[last_user + 1 :]
        text = (messages[last_user].content or "") if user_positions else ""
        return cls(
            user_text=_FILE_BLOCK.sub("", text).strip(),
            user_turn=len(user_positions),
            calls=[call for m in after if m.role == "assistant" for call in m.tool_calls],
            results=[m for m in after if m.role == "tool"],
            documents=[(m["name"], m["type"], m["text"]) for m in _FILE_BLOCK.finditer(text)],
            images=messages[last_user].images if user_positions else (),
        )

    @property
    def had_tool_round(self) -> bool:
        return bool(self.calls or self.results)


class DemoProvider:
    """``ChatProvider`` that needs no configuration. ``token_delay_s`` paces
    the stream so the UI shows text arriving; tests set it to 0."""

    name = "demo"

    def __init__(self, *, token_delay_s: float = 0.02) -> None:
        self._token_delay_s = token_delay_s

    def stream_turn(self, request: TurnRequest) -> Iterator[StreamItem]:
        conversation = _Conversation.from_messages(request.messages)
        calls = self._tool_calls(request, conversation)
        logger.debug("Demo model answers with %d tool call(s)", len(calls))
        text = PREAMBLE if calls else compose_answer(conversation)
        yield from self._stream_text(text)
        digest = _digest(conversation.user_text, conversation.user_turn, len(conversation.results))
        yield TurnResult(
            text=text,
            tool_calls=calls,
            finish_reason="tool_calls" if calls else "stop",
            usage=_usage(request.messages, text, calls),
            response_id=f"demo-{digest}",
        )

    def _tool_calls(self, request: TurnRequest, conversation: _Conversation) -> list[ToolCall]:
        """Tools are asked for once per user message, and only tools the
        request offers (none on a forced final turn)."""
        if not request.tools or conversation.had_tool_round:
            return []
        intents = detect_intents(conversation.user_text, offered_tool_names(request.tools))
        intents += catalog_intents(conversation.user_text, request.tools, skip=BUILT_IN_INTENT_TOOLS)
        intents.sort(key=lambda intent: intent.position)
        return [_tool_call(intent, conversation, k) for k, intent in enumerate(intents)]

    def _stream_text(self, text: str) -> Iterator[TextDelta]:
        for position, token in enumerate(tokens(text)):
            if position and self._token_delay_s > 0:
                time.sleep(self._token_delay_s)
            yield TextDelta(token)


def offered_tool_names(tools: list[dict[str, Any]]) -> set[str]:
    return {str(tool.get("function", {}).get("name")) for tool in tools if tool.get("function")}


def tokens(text: str) -> list[str]:
    """Words with their trailing whitespace, so the pieces join back exactly."""
    return re.findall(r"\S+\s*|\s+", text)


def compose_answer(conversation: _Conversation) -> str:
    """One sentence per tool result, or the canned introduction."""
    if not conversation.results:
        if conversation.calls:
            return NOTHING_LEFT_REPLY
        return _attachments_reply(conversation) or CANNED_REPLY
    calls_by_id = {call.id: call for call in conversation.calls}
    sentences = [
        _sentence(result, calls_by_id.get(result.tool_call_id or "")) for result in conversation.results
    ]
    return " ".join(sentences)


def _attachments_reply(conversation: _Conversation) -> str:
    """What the demo says of the files it was given: it reads nothing, but
    it shows that they arrived and what a real model gets of them."""
    sentences = []
    for name, content_type, text in conversation.documents:
        words = len(text.split())
        opening = " ".join(text.split()[:12])
        sentences.append(f"You attached {name} ({content_type}, {words:,} words of text), which begins: "
                         f"\"{opening}{'…' if words > 12 else ''}\"")
    if conversation.images:
        count = len(conversation.images)
        sentences.append(f"You attached {count} image{'s' if count > 1 else ''}.")
    if not sentences:
        return ""
    sentences.append("I'm the ChatForge demo model, so I only report what arrived; a real model gets the "
                     "documents' text and sees the images.")
    return " ".join(sentences)


def _sentence(result: ChatMessage, call: ToolCall | None) -> str:
    name = (call.name if call else None) or result.name or "tool"
    output = (result.content or "").strip()
    if output.lower().startswith("error"):
        reason = re.sub(r"^error:\s*", "", output, flags=re.IGNORECASE) or "no details given"
        return f"The {name} tool returned an error: {_full_stop(reason)}"
    arguments = _json_object(call.arguments) if call else {}
    payload = _json_object(output)
    if name == "get_time":
        zone = payload.get("timezone") or arguments.get("timezone") or "UTC"
        value = _first(payload, ("iso", "datetime", "time", "now", "local_time", "utc")) or output
        weekday = f" ({payload['weekday']})" if payload.get("weekday") else ""
        return f"The current time in {zone} is {_full_stop(f'{value}{weekday}')}"
    if name == "calculator":
        expression = payload.get("expression") or arguments.get("expression") or "The result"
        value = _first(payload, ("result", "value", "answer"))
        return f"{expression} = {_full_stop(str(value if value is not None else output))}"
    if name == "echo":
        return f"You said: {_full_stop(str(payload.get('text') or output))}"
    return f"The {name} tool returned: {_full_stop(output)}"


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _first(payload: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if payload.get(key) is not None:
            return payload[key]
    return None


def _full_stop(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else f"{text}."


def _tool_call(intent: Intent, conversation: _Conversation, k: int) -> ToolCall:
    """Ids depend on the user text and on which user message this is, so
    they are deterministic yet differ when the same question is asked twice."""
    digest = _digest(conversation.user_text, conversation.user_turn, 0)
    return ToolCall(id=f"call_{digest}_{k}", name=intent.tool, arguments=json.dumps(intent.arguments))


def _digest(text: str, user_turn: int, round_index: int) -> str:
    return hashlib.sha256(f"{user_turn}:{round_index}:{text}".encode()).hexdigest()[:12]


def _usage(messages: list[ChatMessage], text: str, calls: list[ToolCall]) -> dict[str, int]:
    """Word counts: rough, but stable, which is what tests and the UI need."""
    prompt = sum(len((m.content or "").split()) for m in messages)
    completion = len(text.split()) + sum(len(call.arguments.split()) for call in calls)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
