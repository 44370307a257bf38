"""MCP tools in the catalog: the one function ``chatforge.catalog.catalog`` calls.

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

from tools.registry import DuplicateToolError, ToolRegistry

from .discovery import claim_refresh, is_due
from .models import McpServer
from .tasks import enqueue_discovery
from .tools import server_tools

logger = logging.getLogger(__name__)


def register_mcp_tools(registry: ToolRegistry, *, disabled: set[str]) -> None:
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
