"""A plug-in tool module, loaded by dotted path in the registry tests."""

from __future__ import annotations

from typing import Any

from tools.base import Tool, ToolContext


def shout(arguments: dict[str, Any], context: ToolContext) -> str:
    return arguments["text"].upper()


SHOUT = Tool(
    name="shout",
    description="Upper-case the text.",
    parameters={
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": False,
    },
    handler=shout,
)

TOOLS = [SHOUT]
