"""Provider-neutral ``ChatMessage``s in the Anthropic Messages shape.

Rules, each for a reason:

* System messages, wherever they are, become the top-level ``system`` text
  blocks in order: the API has no system role inside ``messages``. The last
  block carries ``cache_control: ephemeral`` so the stable prefix is cached.
* Every message becomes a list of blocks. Empty or whitespace-only text is
  left out (the API rejects such text blocks) and a message left with no
  blocks is dropped.
* An assistant message with text and tool calls becomes one assistant message:
  the text block, then one ``tool_use`` block per call. ``input`` must be an
  object: the call's arguments are parsed, and arguments that are not a JSON
  object (the model produced invalid JSON, which the executor already reported
  back as the call's result) are sent as ``{"_raw": "<the text>"}`` so the
  history stays valid and the model can still see what it sent.
* Thinking blocks kept with a tool call (``ToolCall.metadata["anthropic_thinking"]``,
  set by the adapter on the first call of a turn) are replayed first in that
  assistant message, with their signatures, as the API requires.
* Tool results become ``tool_result`` blocks; ``is_error`` is set when the
  output starts with "Error" (the executor's convention).
* Adjacent messages of the same role are merged: consecutive tool results
  become ONE user message, and a person's message right after tool results
  joins that message. ``tool_result`` blocks go first in a user message and
  thinking blocks first in an assistant message.
* Pairing is repaired rather than left to fail with a 400: a ``tool_use``
  without a result gets an error result, and a result whose call is not in the
  preceding assistant message becomes a plain text block.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, assert_never

from chatforge.llm.providers.base import ChatMessage, ToolCall
from chatforge.llm.providers.images import data_url_parts

logger = logging.getLogger(__name__)

THINKING_METADATA_KEY = "anthropic_thinking"
THINKING_BLOCK_TYPES = frozenset({"thinking", "redacted_thinking"})
EPHEMERAL_CACHE = {"type": "ephemeral"}
MISSING_RESULT = "Error: no result was recorded for this tool call."
RAW_ARGUMENTS_KEY = "_raw"

Block = dict[str, Any]


@dataclass(frozen=True)
class AnthropicConversation:
    """``system`` blocks and ``messages`` ready for ``messages.create``."""

    system: list[Block]
    messages: list[dict[str, Any]]

    def tool_names(self) -> list[str]:
        """Names of the tools called in the history, first use first."""
        names: list[str] = []
        for message in self.messages:
            for block in message["content"]:
                if block["type"] == "tool_use" and block["name"] not in names:
                    names.append(block["name"])
        return names

    def has_tool_blocks(self) -> bool:
        return any(
            block["type"] in ("tool_use", "tool_result") for m in self.messages for block in m["content"]
        )

    def continues_tool_use_without_thinking(self) -> bool:
        """True when the request continues a tool loop (the last assistant
        message after the person's last message called tools) and that message
        has no thinking block to replay. With ``thinking`` enabled the API
        rejects such a request, so the adapter sends it without thinking."""
        for message in reversed(self.messages):
            blocks = message["content"]
            if message["role"] == "user" and any(b["type"] == "text" for b in blocks):
                return False
            if message["role"] == "assistant":
                calls_tools = any(b["type"] == "tool_use" for b in blocks)
                return calls_tools and blocks[0]["type"] not in THINKING_BLOCK_TYPES
        return False


def to_anthropic(messages: Sequence[ChatMessage]) -> AnthropicConversation:
    system: list[Block] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            system.extend(_text_blocks(message.content))
            continue
        role, blocks = _blocks(message)
        if not blocks:
            logger.debug("Leaving out an empty %s message", message.role)
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    turns = _paired(turns)
    for turn in turns:
        first = "tool_result" if turn["role"] == "user" else THINKING_BLOCK_TYPES
        turn["content"].sort(key=lambda block: 0 if block["type"] in first else 1)  # stable
    if system:
        system[-1] = {**system[-1], "cache_control": dict(EPHEMERAL_CACHE)}
    return AnthropicConversation(system=system, messages=turns)


def tool_input(arguments: str) -> dict[str, Any]:
    """A call's arguments as the object ``tool_use.input`` must be."""
    if not arguments or not arguments.strip():
        return {}
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {RAW_ARGUMENTS_KEY: arguments}
    return parsed if isinstance(parsed, dict) else {RAW_ARGUMENTS_KEY: arguments}


def thinking_blocks_of(calls: Iterable[ToolCall]) -> list[Block]:
    """The thinking blocks stored with a turn's calls, validated and copied."""
    for call in calls:
        stored = call.metadata.get(THINKING_METADATA_KEY) if call.metadata else None
        if isinstance(stored, list):
            return [
                dict(block)
                for block in stored
                if isinstance(block, dict) and block.get("type") in THINKING_BLOCK_TYPES
            ]
    return []


def _blocks(message: ChatMessage) -> tuple[str, list[Block]]:
    match message.role:
        case "user":
            return "user", _text_blocks(message.content) + [_image_block(url) for url in message.images]
        case "assistant":
            blocks = thinking_blocks_of(message.tool_calls) if message.tool_calls else []
            blocks += _text_blocks(message.content)
            blocks += [_tool_use(call) for call in message.tool_calls]
            return "assistant", blocks
        case "tool":
            return "user", [_tool_result(message.tool_call_id or "", message.content or "", message.name)]
        case "system":
            raise ValueError("system messages are handled by the caller")
        case _:
            assert_never(message.role)


def _image_block(url: str) -> Block:
    data = data_url_parts(url)
    if data is not None:
        return {"type": "image", "source": {"type": "base64", "media_type": data[0], "data": data[1]}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _text_blocks(text: str | None) -> list[Block]:
    return [{"type": "text", "text": text}] if text and text.strip() else []


def _tool_use(call: ToolCall) -> Block:
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": tool_input(call.arguments)}


def _tool_result(call_id: str, output: str, name: str | None = None) -> Block:
    block: Block = {"type": "tool_result", "tool_use_id": call_id}
    if output:
        block["content"] = output
    if output.startswith("Error"):
        block["is_error"] = True
    if name:
        block["_name"] = name  # dropped by _paired; only used to describe an orphaned result
    return block


def _paired(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every ``tool_use`` answered in the next user message, every result
    answering a call of the previous assistant message."""
    paired: list[dict[str, Any]] = []
    for position, turn in enumerate(turns):
        if turn["role"] == "user":
            previous = paired[-1] if paired and paired[-1]["role"] == "assistant" else None
            calls = {b["id"] for b in previous["content"] if b["type"] == "tool_use"} if previous else set()
            turn = {"role": "user", "content": [_orphan_as_text(b, calls) for b in turn["content"]]}
            paired.append(turn)
            continue
        paired.append(turn)
        call_ids = [b["id"] for b in turn["content"] if b["type"] == "tool_use"]
        if not call_ids:
            continue
        following = turns[position + 1] if position + 1 < len(turns) else None
        answered = {b.get("tool_use_id") for b in following["content"]} if following else set()
        missing = [call_id for call_id in call_ids if call_id not in answered]
        if missing:
            logger.warning(
                "Tool calls without results in the history; sending an error result for %s", missing
            )
            filler = [_tool_result(call_id, MISSING_RESULT) for call_id in missing]
            if following is not None:
                following["content"][:0] = filler
            else:
                paired.append({"role": "user", "content": filler})
    for turn in paired:
        for block in turn["content"]:
            block.pop("_name", None)
    return paired


def _orphan_as_text(block: Block, calls: set[str]) -> Block:
    if block["type"] != "tool_result" or block["tool_use_id"] in calls:
        return block
    logger.warning("A tool result answers no call of the previous message; sending it as text")
    name = block.get("_name") or "a tool"
    return {
        "type": "text",
        "text": f"(Result of {name}, call {block['tool_use_id']}): {block.get('content', '')}",
    }
