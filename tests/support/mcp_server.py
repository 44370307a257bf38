"""A real MCP server on loopback for tests, built with the ``mcp`` SDK's own
server side (``MCPServer``, the former FastMCP) and served by uvicorn in a
thread: streamable HTTP at ``/mcp``, or the older SSE transport at ``/sse``.

Its tools cover what ChatForge must handle: ``add`` succeeds, ``fail``
returns an ``isError`` result, ``hang`` sleeps past any sensible timeout,
``whoami`` answers only a request carrying ``Authorization: Bearer
BEARER_TOKEN`` (and echoes the header, so tests can see it scrubbed), and
``strict_echo`` answers with a JSON-RPC error (invalid params).

The shared streamable HTTP server listens on ``MCP_SERVER_PORT``, chosen when
this module is imported, so that the distributed stack (started before any
test asks for the server) can allow it through the tools' address guard.
"""

from __future__ import annotations

import socket
import threading
import time
from unittest import mock

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import ToolAnnotations
from mcp_types import INVALID_PARAMS

BEARER_TOKEN = "mcp-test-bearer-7f3a9c"
TOOL_NAMES = ("add", "fail", "hang", "whoami", "strict_echo")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


MCP_SERVER_PORT = _free_port()
MCP_SERVER_HOST_PORT = f"127.0.0.1:{MCP_SERVER_PORT}"


def build_server() -> MCPServer:
    # MCPServer() calls logging.basicConfig with a rich handler: not in a test process.
    with mock.patch("mcp.server.mcpserver.server.configure_logging"):
        server = MCPServer("chatforge-test", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails, saying why."""
        raise ToolError(f"cannot do that: {reason}")

    @server.tool()
    async def hang(seconds: float = 60) -> str:
        """Sleeps for the given number of seconds, then answers."""
        await anyio.sleep(seconds)
        return "woke up"

    @server.tool()
    async def whoami(ctx: Context) -> str:
        """Says who the caller is; needs the bearer token."""
        request = ctx.request_context.request
        sent = request.headers.get("authorization", "") if request is not None else ""
        if sent != f"Bearer {BEARER_TOKEN}":
            raise ToolError("unauthorized: send the bearer token of your account")
        return f"authorized as the token holder (the request carried {sent})"

    @server.tool()
    def strict_echo(text: str) -> str:
        """Echoes text, refusing an empty one with a protocol error."""
        if not text:
            raise MCPError(code=INVALID_PARAMS, message="text must not be empty")
        return text

    return server


class RunningMcpServer:
    """One server on 127.0.0.1, in a daemon thread, until ``stop``."""

    def __init__(self, *, port: int | None = None, transport: str = "streamable_http") -> None:
        self.port = port or _free_port()
        self.transport = transport
        app = build_server()
        if transport == "sse":
            asgi = app.sse_app(host="127.0.0.1")
        else:
            asgi = app.streamable_http_app(host="127.0.0.1")
        config = uvicorn.Config(
            asgi, host="127.0.0.1", port=self.port, log_level="warning", timeout_graceful_shutdown=1,
            lifespan="on",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name=f"mcp-test-{self.port}", daemon=True)

    @property
    def host_port(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        path = "/sse" if self.transport == "sse" else "/mcp"
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> RunningMcpServer:
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the test MCP server did not start on port {self.port}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)


_shared: RunningMcpServer | None = None
_shared_lock = threading.Lock()


def shared_server() -> RunningMcpServer:
    """The streamable HTTP server on ``MCP_SERVER_PORT``, started on first use,
    kept for the rest of the test process (its thread is a daemon)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = RunningMcpServer(port=MCP_SERVER_PORT).start()
        return _shared
