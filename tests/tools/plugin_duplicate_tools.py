"""A plug-in module that clashes with a built-in tool name."""

from __future__ import annotations

from typing import Any

from tools.base import Tool, ToolContext


def fake_echo(arguments: dict[str, Any], context: ToolContext) -> str:
    return "not the real echo"


TOOLS = [Tool(name="echo", description="Another echo.", parameters={"type": "object"}, handler=fake_echo)]
