"""Small builders for tools and registries used across the tool tests."""

from __future__ import annotations

from typing import Any

from tools.base import Handler, Tool, ToolContext, ToolPolicy
from tools.registry import ToolRegistry

OPEN_OBJECT: dict[str, Any] = {"type": "object"}


def return_arguments(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    return arguments


def make_tool(
    name: str = "sample",
    handler: Handler = return_arguments,
    parameters: dict[str, Any] | None = None,
    **policy: Any,
) -> Tool:
    """A tool with an open object schema unless ``parameters`` is given; ``policy`` fields as kwargs."""
    return Tool(
        name=name,
        description=f"Test tool {name}.",
        parameters=OPEN_OBJECT if parameters is None else parameters,
        handler=handler,
        policy=ToolPolicy(**policy),
    )


def registry_of(*tools: Tool) -> ToolRegistry:
    registry = ToolRegistry()
    for tool in tools:
        registry.register(tool)
    return registry
