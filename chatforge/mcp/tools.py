"""A server row's discovered tools as ordinary ``tools.base.Tool`` objects.

Each tool is offered as ``<server>__<tool>`` with the input schema the server
listed (checked and enforced strictly like any tool's: ``tools.base.Tool``),
the policy of ``policy.py``, and a handler that calls the server. Being a
plain ``Tool``, it gets everything else from the executor: validation,
timeouts, retries, secret scrubbing, output truncation, repeat detection.

What cannot be offered is said, per tool, with the reason: the admin shows
it next to the discovered list.
"""

from __future__ import annotations

import re
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from tools.base import Tool, ToolContext

from .client import ServerConfig, call_tool
from .headers import call_headers
from .models import McpServer
from .policy import tool_policy
from .results import tool_output

SEPARATOR = "__"
# The alphabet and length every provider accepts for a tool name (tools.base).
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


@dataclass(frozen=True)
class LeftOut:
    """A discovered tool that is not offered, and why."""

    name: str  # the server's own name for it
    reason: str
    # Left out by the operator's allow-list, not because something is wrong.
    by_choice: bool = False


@dataclass(frozen=True)
class ServerTools:
    offered: list[Tool]
    left_out: list[LeftOut]


class McpToolHandler:
    """Calls one tool of one server.

    Called in the executor's handler thread, it fills the headers there (a
    user's secret may be read from the database, which async code may not
    do) and returns the coroutine of the call, which the executor runs under
    the tool's timeout and cancels cleanly when it expires.
    """

    def __init__(self, config: ServerConfig, tool_name: str, timeout_s: float) -> None:
        self.config = config
        self.tool_name = tool_name
        self.timeout_s = timeout_s

    def __call__(self, arguments: dict[str, Any], context: ToolContext) -> Coroutine[Any, Any, Any]:
        headers = call_headers(self.config.header_templates, context)
        return self._call(arguments, headers)

    async def _call(self, arguments: dict[str, Any], headers: dict[str, str]) -> Any:
        result = await call_tool(
            self.config, self.tool_name, arguments, headers=headers, timeout_s=self.timeout_s
        )
        return tool_output(result, server=self.config.name)


def namespaced(server_name: str, tool_name: str) -> str:
    return f"{server_name}{SEPARATOR}{tool_name}"


def is_mcp_tool(tool: Tool) -> bool:
    return isinstance(tool.handler, McpToolHandler)


def server_of(tool: Tool) -> str | None:
    """The name of the server an MCP tool calls (None for other tools)."""
    return tool.handler.config.name if isinstance(tool.handler, McpToolHandler) else None


def server_tools(server: McpServer) -> ServerTools:
    """The tools ``server``'s stored list offers, and those it cannot."""
    config = ServerConfig.of(server)
    allowed = set(server.allowed_tools or []) if isinstance(server.allowed_tools, list) else set()
    offered: list[Tool] = []
    left_out: list[LeftOut] = []
    for entry in server.discovered_tools or []:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            left_out.append(LeftOut(name=str(name), reason="the stored entry is not a tool"))
            continue
        if allowed and name not in allowed:
            left_out.append(LeftOut(name=name, reason="not in the server's allow-list", by_choice=True))
            continue
        try:
            offered.append(_tool(server, config, entry, name))
        except ValueError as exc:
            left_out.append(LeftOut(name=name, reason=str(exc)))
    return ServerTools(offered=offered, left_out=left_out)


def _tool(server: McpServer, config: ServerConfig, entry: dict[str, Any], name: str) -> Tool:
    full_name = namespaced(server.name, name)
    if not _TOOL_NAME.fullmatch(full_name):
        raise ValueError(
            f"'{full_name}' is not a usable tool name: models accept 1-64 characters from a-z, A-Z, 0-9, "
            "'_' and '-'"
        )
    try:
        policy = tool_policy(server, name)
    except ValueError as exc:
        raise ValueError(f"its policy override is invalid: {exc}") from None
    description = entry.get("description") or entry.get("title") or ""
    if not isinstance(description, str) or not description.strip():
        description = f"Tool '{name}' of the MCP server '{server.name}'."
    try:
        return Tool(
            name=full_name,
            description=description,
            parameters=entry.get("input_schema"),  # type: ignore[arg-type] - checked by Tool
            handler=McpToolHandler(config, name, policy.timeout_s),
            policy=policy,
        )
    except (ValueError, TypeError) as exc:
        raise ValueError(f"its input schema cannot be used: {exc}") from None
