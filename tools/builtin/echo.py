"""The ``echo`` tool: returns its input, for testing tool calling end to end."""

from __future__ import annotations

from typing import Any

from tools.base import Tool, ToolContext, ToolPolicy


def echo(arguments: dict[str, Any], context: ToolContext) -> str:
    return arguments["text"]


ECHO = Tool(
    name="echo",
    description="Return the given text unchanged. Useful for testing tool calls.",
    parameters={
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The text to return."}},
        "required": ["text"],
        "additionalProperties": False,
    },
    handler=echo,
    policy=ToolPolicy(timeout_s=5.0, side_effects="read_only"),
)
