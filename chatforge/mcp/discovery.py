"""Asking a server for its tools (``tools/list``) and storing the answer on its row.

The stored list is what every process builds the server's tools from, so
runs never wait for a server to list its tools, and all workers offer the
same ones. It is refreshed:

* at once when an operator saves the server or clicks "Refresh tools now"
  in the admin (``discover``);
* after CHATFORGE_MCP_DISCOVERY_TTL_S, in the background: the catalog, when
  it sees a list that old, claims the refresh with one conditional UPDATE
  (so one process of all those building catalogs wins) and enqueues
  ``tasks.mcp_discover`` for a tools worker.

A failed discovery keeps the last good list (a server that is down for a
minute should not lose its tools from every assistant) and records the
error, which the admin shows; calls made meanwhile fail with their own,
explained errors.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone
from mcp.types import Tool as McpTool

from chatforge.catalog import versioning as catalog_versioning
from tools.base import ToolContext
from tools.errors import ToolError
from tools.redaction import redact_text

from .client import ServerConfig, list_tools, run_blocking
from .headers import discovery_headers
from .models import McpServer

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DiscoveryOutcome:
    """How one discovery ended, for the admin's message."""

    ok: bool
    tool_count: int
    error: str = ""


def discover(server: McpServer) -> DiscoveryOutcome:
    """List ``server``'s tools now and store them (or the error) on its row.

    Blocks for at most CHATFORGE_MCP_DISCOVERY_TIMEOUT_S (plus a grace). The
    instance is updated too, so the caller sees what was stored.
    """
    timeout_s = settings.CHATFORGE_MCP_DISCOVERY_TIMEOUT_S
    context = ToolContext()  # no user: only environment values fill placeholders
    headers, left_out = discovery_headers(server.headers if isinstance(server.headers, dict) else {}, context)
    config = ServerConfig.of(server)
    now = timezone.now()
    try:
        listed = run_blocking(
            lambda: list_tools(config, headers=headers, timeout_s=timeout_s), timeout_s=timeout_s
        )
    except ToolError as exc:
        return _failed(server, now, str(exc), left_out, context)
    except TimeoutError:
        return _failed(server, now, f"the MCP server '{server.name}' did not list its tools within "
                                    f"{timeout_s:g} seconds", left_out, context)
    except Exception as exc:  # noqa: BLE001 - recorded for the operator, never raised into a catalog
        logger.exception("MCP discovery of %s failed unexpectedly", server.name)
        return _failed(server, now, f"{type(exc).__name__}: {exc}", left_out, context)
    tools = [stored_tool(tool) for tool in listed]
    McpServer.objects.filter(pk=server.pk).update(
        discovered_tools=tools, discovered_at=now, discovery_attempted_at=now, discovery_error=""
    )
    if tools != server.discovered_tools:  # a periodic refresh usually finds the same list
        catalog_versioning.bump()  # an update() sends no post_save
    server.discovered_tools, server.discovered_at = tools, now
    server.discovery_attempted_at, server.discovery_error = now, ""
    logger.info("MCP server %s lists %d tool(s)", server.name, len(tools), extra={"mcp_server": server.name})
    return DiscoveryOutcome(ok=True, tool_count=len(tools))


def stored_tool(tool: McpTool) -> dict[str, Any]:
    """What the row keeps of one listed tool: enough to build it and to show it."""
    return {
        "name": tool.name,
        "title": tool.title,
        "description": tool.description or "",
        "input_schema": tool.input_schema,
        # Hints from the server (read-only, destructive...), shown to the
        # operator; never trusted to set a policy.
        "annotations": tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
        if tool.annotations is not None
        else None,
    }


def is_due(server: McpServer, now: datetime) -> bool:
    """Whether the server's list is older than the TTL (or was never asked for)."""
    attempted = server.discovery_attempted_at
    return attempted is None or now - attempted >= _ttl()


def claim_refresh(server: McpServer, now: datetime) -> bool:
    """Mark the server's refresh as started, unless another process just did.

    One conditional UPDATE: of all the processes that see the list is old,
    exactly one changes the row and enqueues the refresh.
    """
    not_recent = Q(discovery_attempted_at__isnull=True) | Q(discovery_attempted_at__lte=now - _ttl())
    claimed = McpServer.objects.filter(not_recent, pk=server.pk, enabled=True)
    return claimed.update(discovery_attempted_at=now) == 1


def discover_if_due(*, server_id: int) -> DiscoveryOutcome | None:
    """The background refresh: discover unless the server is gone, disabled,
    or was discovered within the TTL meanwhile (by an admin's refresh)."""
    server = McpServer.objects.filter(pk=server_id, enabled=True).first()
    if server is None:
        return None
    if server.discovered_at is not None and timezone.now() - server.discovered_at < _ttl():
        return None
    return discover(server)


def _failed(
    server: McpServer, now: datetime, error: str, left_out: list[str], context: ToolContext
) -> DiscoveryOutcome:
    if left_out:
        error += (
            f" (sent without the header(s) {', '.join(left_out)}: their placeholders are filled only "
            "for a user's tool calls)"
        )
    error = redact_text(error, context.secrets_seen.values())
    McpServer.objects.filter(pk=server.pk).update(discovery_attempted_at=now, discovery_error=error)
    server.discovery_attempted_at, server.discovery_error = now, error
    logger.warning("MCP discovery of %s failed: %s", server.name, error, extra={"mcp_server": server.name})
    return DiscoveryOutcome(ok=False, tool_count=len(server.discovered_tools or []), error=error)


def _ttl() -> timedelta:
    return timedelta(seconds=settings.CHATFORGE_MCP_DISCOVERY_TTL_S)
