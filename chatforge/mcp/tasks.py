"""The background refresh of a server's tool list, run by a tools worker.

Sent straight to the ``tools`` queue, whose prefork workers already talk to
MCP servers for tool calls: the LLM worker runs on gevent, where the SDK's
event loop has no business. Like the engine's tasks it takes an id and
returns at once when the work is no longer wanted (``discover_if_due``).
"""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from .discovery import discover_if_due


@shared_task(name="chatforge.mcp_discover", time_limit=int(settings.CHATFORGE_MCP_DISCOVERY_TIMEOUT_S) + 30)
def mcp_discover(server_id: int) -> None:
    discover_if_due(server_id=server_id)


def enqueue_discovery(server_id: int) -> None:
    """Send the refresh of server ``server_id`` to the tools queue (through the
    anonymous exchange, as the engine's own routes do: chatforge/settings/queues.py)."""
    mcp_discover.apply_async(args=[server_id], queue="tools", exchange="", routing_key="tools", declare=())
