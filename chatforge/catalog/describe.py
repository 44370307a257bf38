"""How a tool is described to people: the API's tool list and the web pages
show the same fields, built here once."""

from __future__ import annotations

from typing import Any

from tools.base import Tool

from .catalog import get_catalog
from .code_tools import code_tool_names
from .sources import tool_sources


def describe_tool(tool: Tool, code_names: set[str]) -> dict[str, Any]:
    policy = tool.policy
    return {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "kind": "code" if tool.name in code_names else _source_kind(tool) or "data",
        "policy": {
            "timeout_s": policy.timeout_s,
            "max_attempts": policy.max_attempts,
            "side_effects": policy.side_effects,
            "requires_approval": policy.requires_approval,
            "pool": policy.pool,
            # Whether its calls run in the sandbox (docs/sandbox.md), and how
            # long an identical call's result is served again (docs/tools.md, "Caching").
            "sandboxed": policy.sandboxed,
            "cache_ttl_s": policy.cache_ttl_s,
        },
    }


def tool_descriptions() -> list[dict[str, Any]]:
    """Every enabled tool, read fresh (an admin's edit shows at once)."""
    code_names = code_tool_names()
    return [describe_tool(tool, code_names) for tool in get_catalog(fresh=True).all()]


def _source_kind(tool: Tool) -> str | None:
    return next((source.kind for source in tool_sources() if source.owns(tool)), None)
