"""MCP tools in the catalog: the tool source this app plugs into the
catalog at start-up (``apps.py``; ``chatforge/catalog/sources.py``).

Builds every enabled server's tools from its stored list (no network) and
registers them after the code and data tools, so a name that is already
taken stays with its owner: the MCP tool is left out and the collision
logged, as for data tools. Lists older than the discovery TTL get a
background refresh (``discovery.claim_refresh``).
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from chatforge.catalog.sources import FoundTool, ToolSource
from tools.registry import DuplicateToolError, ToolRegistry

from .discovery import claim_refresh, is_due
from .models import McpServer
from .tasks import enqueue_discovery
from .tools import SEPARATOR, is_mcp_tool, server_tools

logger = logging.getLogger(__name__)


def register_mcp_tools(registry: ToolRegistry, disabled: set[str]) -> None:
    """Add the tools of every enabled MCP server to ``registry`` (names in ``disabled`` left out)."""
    now = timezone.now()
    for server in McpServer.objects.filter(enabled=True):
        if is_due(server, now) and claim_refresh(server, now):
            transaction.on_commit(lambda pk=server.pk: _enqueue(pk))
        built = server_tools(server)
        for left_out in built.left_out:
            if not left_out.by_choice:
                logger.warning(
                    "MCP tool %r of server %r left out: %s", left_out.name, server.name, left_out.reason
                )
        for tool in built.offered:
            if tool.name in disabled:
                continue
            try:
                registry.register(tool)
            except DuplicateToolError:
                logger.error(
                    "MCP tool %r of server %r is shadowed by another tool of the same name; left out",
                    tool.name,
                    server.name,
                )


def _enqueue(server_id: int) -> None:
    try:
        enqueue_discovery(server_id)
    except Exception:  # the broker may be down: the next TTL tries again
        logger.exception("could not enqueue the tool refresh of MCP server %s", server_id)


def find_mcp_tool(name: str) -> FoundTool | None:
    """``<server>__<tool>`` from the server row's stored list, whether or not
    the server is enabled (an operator tries a server before switching it on)."""
    server_name, separator, _ = name.partition(SEPARATOR)
    server = McpServer.objects.filter(name=server_name).first() if separator else None
    if server is None:
        return None
    tool = next((t for t in server_tools(server).offered if t.name == name), None)
    if tool is None:
        return None
    reason = "" if server.enabled else f"The MCP server '{server.name}' is disabled: runs do not offer its tools."
    return FoundTool(tool=tool, unavailable_reason=reason)


MCP_SOURCE = ToolSource(kind="mcp", register=register_mcp_tools, owns=is_mcp_tool, find=find_mcp_tool)
