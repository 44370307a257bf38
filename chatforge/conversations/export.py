"""A conversation as a file its owner keeps: Markdown to read, JSON to load.

Both hold the current branch (``selectors.messages_of``), each message with
its role, model and time, its tool rounds (each call's name, arguments,
result and status) and its files as links to their bytes
(``/api/files/{id}/content/``, which asks for the owner's login: an export
passed on does not pass the files on). The JSON shape is versioned
(``FORMAT_VERSION``) and documented in docs/api.md.

The files come from the caller (``attachments``: message id -> files):
which files a message names is the files domain's knowledge, a layer above
this one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from .models import Conversation, Message

FORMAT_VERSION = 1
ROLE_NAMES = {"user": "User", "assistant": "Assistant", "system": "System", "tool": "Tool"}


class AttachedFile(Protocol):
    pk: Any
    name: str
    content_type: str
    size: int


FileUrl = Callable[[str], str]


def export_filename(conversation: Conversation, extension: str) -> str:
    """``Trip-to-Porto.md``: the title's words joined by hyphens (any
    language's letters kept), or the conversation's id when it has none."""
    words = re.findall(r"\w+", conversation.title or "", flags=re.UNICODE)
    stem = "-".join(words)[:80].strip("-_") or f"conversation-{conversation.pk}"
    return f"{stem}.{extension}"


def _time(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def _rounds(message: Message) -> list[dict[str, Any]]:
    """The stored rounds without the provider's opaque per-call metadata."""
    rounds = []
    for rnd in message.tool_rounds or []:
        rounds.append({
            "iteration": rnd.get("iteration"),
            "assistant_response": rnd.get("assistant_response") or "",
            "tool_calls": [{"id": c.get("id", ""), "name": c.get("name", ""), "arguments": c.get("arguments", "")}
                           for c in rnd.get("tool_calls") or []],
            "results": [{"tool_call_id": r.get("tool_call_id", ""), "name": r.get("name", ""),
                         "output": r.get("output", ""), "status": r.get("status", ""),
                         "execution_time_ms": r.get("execution_time_ms")}
                        for r in rnd.get("results") or []],
        })
    return rounds


def _files(message: Message, attachments: Mapping[Any, Sequence[AttachedFile]], file_url: FileUrl) -> list[dict]:
    return [{"id": str(f.pk), "name": f.name, "content_type": f.content_type, "size": f.size,
             "url": file_url(str(f.pk))} for f in attachments.get(message.pk, ())]


def export_json(
    *, conversation: Conversation, messages: Sequence[Message],
    attachments: Mapping[Any, Sequence[AttachedFile]], file_url: FileUrl, exported_at: datetime,
) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "exported_at": _time(exported_at),
        "conversation": {
            "id": str(conversation.pk),
            "title": conversation.title,
            "created_at": _time(conversation.created_at),
            "updated_at": _time(conversation.updated_at),
        },
        "messages": [
            {
                "id": str(m.pk),
                "role": m.role,
                "content": m.content,
                "status": m.status,
                "model": m.model,
                "created_at": _time(m.created_at),
                "attachments": _files(m, attachments, file_url),
                "tool_rounds": _rounds(m),
            }
            for m in messages
        ],
    }


def _fence(text: str, language: str = "") -> str:
    """``text`` as a fenced code block whose fence no backtick run inside it
    can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def _pretty(arguments: Any) -> tuple[str, str]:
    """Arguments as indented JSON when they are JSON, else as they came."""
    if not isinstance(arguments, str):
        return json.dumps(arguments, indent=2, ensure_ascii=False), "json"
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False), "json"
    except ValueError:
        return arguments, ""


def _link_text(name: str) -> str:
    return re.sub(r"([\\\[\]])", r"\\\1", name)


def _size(size: int) -> str:
    for unit in ("bytes", "KB", "MB"):
        if size < 1024 or unit == "MB":
            return f"{size} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size} bytes"


def _markdown_rounds(rounds: list[dict[str, Any]]) -> list[str]:
    parts: list[str] = []
    for number, rnd in enumerate(rounds, start=1):
        parts.append(f"#### Tool round {number}")
        if rnd["assistant_response"]:
            parts.append(rnd["assistant_response"])
        results = {r["tool_call_id"]: r for r in rnd["results"]}
        for call in rnd["tool_calls"]:
            result = results.get(call["id"], {})
            status = result.get("status") or "no result"
            parts.append(f"**Tool call `{call['name']}`** · {status}")
            arguments, language = _pretty(call["arguments"])
            parts.append("Arguments:\n\n" + _fence(arguments, language))
            output, language = _pretty(result.get("output", ""))
            parts.append("Result:\n\n" + _fence(output, language))
    return parts


def export_markdown(
    *, conversation: Conversation, messages: Sequence[Message],
    attachments: Mapping[Any, Sequence[AttachedFile]], file_url: FileUrl, exported_at: datetime,
) -> str:
    data = export_json(conversation=conversation, messages=messages, attachments=attachments, file_url=file_url,
                       exported_at=exported_at)
    parts = [f"# {conversation.title or 'Untitled conversation'}",
             f"Exported from ChatForge at {data['exported_at']}. Linked files need your ChatForge login."]
    for message in data["messages"]:
        heading = [ROLE_NAMES.get(message["role"], message["role"])]
        if message["model"]:
            heading.append(f"`{message['model']}`")
        heading.append(message["created_at"] or "")
        if message["status"] not in ("", "final"):
            heading.append(message["status"])
        parts.append("---")
        parts.append("### " + " · ".join(heading))
        parts.extend(_markdown_rounds(message["tool_rounds"]))
        if message["content"]:
            parts.append(message["content"])
        if message["attachments"]:
            parts.append("Files:\n\n" + "\n".join(
                f"- [{_link_text(f['name'])}]({f['url']}) ({f['content_type']}, {_size(f['size'])})"
                for f in message["attachments"]))
    return "\n\n".join(parts) + "\n"
