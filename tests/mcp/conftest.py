"""Fixtures for the MCP tests: the real test MCP server (tests/support/mcp_server.py),
reachable through the tools' address guard only while a test holds it, and
server rows."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.utils import timezone

from chatforge.mcp.models import McpServer
from tests.support.mcp_server import RunningMcpServer, shared_server
from tools.net import policy

# A public-looking server that no lookup finds: saving it is allowed (the guard
# has no address to refuse), and its listing fails without leaving the machine.
UNRESOLVABLE_URL = "http://mcp.invalid/mcp"


@contextmanager
def allowed_private(host_port: str) -> Iterator[None]:
    """Let tools (and MCP servers) reach ``host_port`` on loopback while held,
    as CHATFORGE_TOOLS_ALLOWED_PRIVATE_HOSTS would."""
    policy.configure(allowed_private_hosts=[host_port])
    try:
        yield
    finally:
        policy.configure(allowed_private_hosts=[])


@pytest.fixture
def mcp_server() -> Iterator[RunningMcpServer]:
    """The streamable HTTP test server, allowed through the guard for this test."""
    running = shared_server()
    with allowed_private(running.host_port):
        yield running


@pytest.fixture(scope="module")
def sse_server_running() -> Iterator[RunningMcpServer]:
    running = RunningMcpServer(transport="sse").start()
    yield running
    running.stop()


@pytest.fixture
def sse_server(sse_server_running: RunningMcpServer) -> Iterator[RunningMcpServer]:
    with allowed_private(sse_server_running.host_port):
        yield sse_server_running


def listed(*names: str) -> list[dict[str, Any]]:
    """A stored tool list, as discovery writes it, with a one-string-argument schema."""
    return [
        {"name": name, "title": None, "description": f"The {name} tool.", "annotations": None,
         "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}
        for name in names
    ]


@pytest.fixture
def make_server() -> Callable[..., McpServer]:
    """Save a checked server row; ``tools`` gives it a stored list without discovery."""

    def make(name: str = "docs", *, tools: list[str] | None = None, **fields: Any) -> McpServer:
        # A host that never resolves (.invalid, RFC 6761): the row saves, and nothing reaches the network.
        server = McpServer(name=name, url=fields.pop("url", UNRESOLVABLE_URL), **fields)
        if tools is not None:
            server.discovered_tools = listed(*tools)
            server.discovered_at = server.discovery_attempted_at = timezone.now()
        server.full_clean()
        server.save()
        return server

    return make
