"""Talking to one MCP server with the official SDK: ``tools/list`` and ``tools/call``.

Each operation opens its own session (``mcp.Client`` over the server's
transport), does one thing and closes it. Tool calls run in the tools
worker's processes, any of which may serve any call, so there is no
long-lived session to keep, resume or share; the cost is one handshake per
call. The SDK does all protocol work - version negotiation (the 2026
``server/discover`` probe, falling back to ``initialize``), framing, SSE,
cancellation; this module only chooses the transport, hands it the guarded
HTTP client (``network.py``) and turns failures into tool errors
(``errors.py``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx2
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, Implementation
from mcp.types import Tool as McpTool

from tools.errors import ToolError

from .errors import HttpStatuses, failure_of
from .models import McpServer
from .network import guarded_client, guarded_target

T = TypeVar("T")

# The HTTP client's own deadline is this much longer than the SDK's per-request
# timeout, which is itself cut by the executor's: the backstops end a request
# shortly after the layer above has given up on it.
_CLIENT_GRACE_S = 1.0
# A server whose tools/list never ends (a cursor loop) cannot hang discovery.
MAX_LIST_PAGES = 50
CLIENT_INFO = Implementation(name="chatforge", version="1")


@dataclass(frozen=True)
class ServerConfig:
    """What a session needs from a server's row, copied so that handlers
    running in other threads never touch a model instance."""

    name: str
    url: str
    transport: str
    headers: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, server: McpServer) -> ServerConfig:
        headers = server.headers if isinstance(server.headers, dict) else {}
        return cls(name=server.name, url=server.url, transport=server.transport, headers=tuple(headers.items()))

    @property
    def header_templates(self) -> dict[str, str]:
        return dict(self.headers)


async def list_tools(config: ServerConfig, *, headers: Mapping[str, str], timeout_s: float) -> list[McpTool]:
    """Every tool the server lists, following ``nextCursor`` pages."""

    async def operation(client: Client) -> list[McpTool]:
        found: list[McpTool] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            found.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return found
        raise ToolError(f"the MCP server '{config.name}' listed more than {MAX_LIST_PAGES} pages of tools")

    return await _in_session(config, headers=headers, timeout_s=timeout_s, operation=operation)


async def call_tool(
    config: ServerConfig,
    tool_name: str,
    arguments: dict[str, Any],
    *,
    headers: Mapping[str, str],
    timeout_s: float,
) -> CallToolResult:
    """The server's result of ``tools/call`` (``isError`` results included: see ``results.py``).

    ``timeout_s`` is the executor's deadline for the call, which cancels it;
    the SDK's own timeout is a little longer, only a backstop.
    """
    backstop_s = timeout_s + _CLIENT_GRACE_S

    async def operation(client: Client) -> CallToolResult:
        return await client.call_tool(tool_name, arguments, read_timeout_seconds=backstop_s)

    return await _in_session(config, headers=headers, timeout_s=backstop_s, operation=operation)


async def _in_session(
    config: ServerConfig,
    *,
    headers: Mapping[str, str],
    timeout_s: float,
    operation: Callable[[Client], Awaitable[T]],
) -> T:
    """Run ``operation`` in a fresh session; any failure becomes a ``ToolError`` subclass.

    Cancellation (the executor's deadline) is not caught: it must unwind the
    SDK's task groups, which closes the connection and tells the server.
    """
    statuses = HttpStatuses()
    try:
        async with _session(config, headers=headers, timeout_s=timeout_s, statuses=statuses) as client:
            return await operation(client)
    except ToolError:
        raise
    except Exception as exc:  # noqa: BLE001 - every failure is explained to the model
        raise failure_of(exc, server=config.name, statuses=statuses, timeout_s=timeout_s) from None


@asynccontextmanager
async def _session(
    config: ServerConfig, *, headers: Mapping[str, str], timeout_s: float, statuses: HttpStatuses
) -> AsyncIterator[Client]:
    target = guarded_target(config.url)
    http_timeout_s = timeout_s + _CLIENT_GRACE_S

    def http_client(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        """The SDK's client factory (the SSE transport's shape); our timeout wins."""
        return guarded_client(
            target, headers=headers or {}, timeout_s=http_timeout_s, on_response=statuses.record
        )

    if config.transport == McpServer.Transport.SSE:
        # The older transport speaks only the handshake era of the protocol.
        transport = sse_client(
            config.url,
            headers=dict(headers),
            timeout=http_timeout_s,
            sse_read_timeout=http_timeout_s,
            httpx_client_factory=http_client,
        )
        async with _client(transport, mode="legacy", timeout_s=timeout_s) as client:
            yield client
        return
    async with http_client(dict(headers)) as http:
        transport = streamable_http_client(config.url, http_client=http)
        async with _client(transport, mode="auto", timeout_s=timeout_s) as client:
            yield client


@asynccontextmanager
async def _client(transport: Any, *, mode: str, timeout_s: float) -> AsyncIterator[Client]:
    # No response cache: the session lives for one operation, and the tool
    # list is cached where every worker sees it, on the server's row.
    async with Client(
        transport, mode=mode, read_timeout_seconds=timeout_s, client_info=CLIENT_INFO, cache=None
    ) as client:
        yield client


def run_blocking(make: Callable[[], Awaitable[T]], *, timeout_s: float) -> T:
    """Run the coroutine ``make()`` returns to completion from synchronous code.

    It runs in a thread of its own with its own event loop, so callers may be
    any thread: an admin view under the ASGI server (whose thread may have a
    loop), a Celery task. Cut at ``timeout_s`` by cancellation; a thread that
    still does not finish is abandoned (it is a daemon) after a grace period.
    """
    outcome: list[tuple[bool, Any]] = []

    async def bounded() -> T:
        return await asyncio.wait_for(make(), timeout_s)

    def target() -> None:
        try:
            outcome.append((True, asyncio.run(bounded())))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            outcome.append((False, exc))

    thread = threading.Thread(target=target, name="mcp-session", daemon=True)
    thread.start()
    thread.join(timeout_s + 5 * _CLIENT_GRACE_S)
    if not outcome:
        raise TimeoutError(f"the MCP session did not end within {timeout_s:g} seconds")
    ok, value = outcome[0]
    if ok:
        return value
    raise value
