"""How MCP failures reach the model: transport failures, HTTP statuses,
JSON-RPC errors and broken answers each become the executor's error type
with a text that says whose fault it is, and transient ones are retried by
the executor within the tool's policy."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, REQUEST_TIMEOUT
from pydantic import BaseModel, ValidationError

from chatforge.mcp.client import ServerConfig, call_tool, run_blocking
from chatforge.mcp.errors import HttpStatuses, failure_of
from chatforge.mcp.network import LeftOrigin, guarded_client
from tests.tools.net.local_server import LocalServer, Reply, allowed, running_server
from tools.base import Tool, ToolPolicy
from tools.errors import ToolArgumentError, ToolError, TransientToolError
from tools.executor import execute_tool
from tools.net.guard import check_url
from tools.registry import ToolRegistry


@pytest.fixture(scope="module")
def local_server_running() -> Iterator[LocalServer]:
    with running_server() as started:
        yield started


@pytest.fixture
def site(local_server_running: LocalServer) -> Iterator[LocalServer]:
    with allowed(local_server_running) as reachable:
        yield reachable


def call(url: str, timeout_s: float = 5):
    config = ServerConfig(name="docs", url=url, transport="streamable_http", headers=())
    return run_blocking(lambda: call_tool(config, "search", {"q": "x"}, headers={}, timeout_s=timeout_s),
                        timeout_s=timeout_s)


def test_refused_credentials_name_the_status_and_whose_fix_it_is(site):
    site.route("/mcp", Reply(401, '{"error": "invalid_token"}', {"Content-Type": "application/json"}))
    with pytest.raises(ToolError) as raised:
        call(site.url("/mcp"))
    assert not isinstance(raised.value, TransientToolError | ToolArgumentError)
    assert str(raised.value) == (
        "the MCP server 'docs' refused the request (HTTP 401): its credentials are missing or wrong; the user "
        "may need to update the secret the server's headers use, or the operator the server's configuration"
    )


def test_an_overloaded_server_is_transient_and_retried_by_the_executor(site):
    site.route("/mcp", Reply(503, "busy", {"Content-Type": "text/plain"}))
    config = ServerConfig(name="docs", url=site.url("/mcp"), transport="streamable_http", headers=())

    async def search(arguments, context):
        return await call_tool(config, "search", arguments, headers={}, timeout_s=5)

    registry = ToolRegistry()
    registry.register(Tool(name="docs__search", description="Search.", handler=search,
                           parameters={"type": "object", "properties": {"q": {"type": "string"}}},
                           policy=ToolPolicy(timeout_s=5, max_attempts=2, side_effects="read_only")))
    result = execute_tool(registry, "docs__search", {"q": "x"}, sleep=lambda s: None)
    assert result.status == "error" and result.attempts == 2
    assert result.error == (
        "Error executing tool 'docs__search': the MCP server 'docs' answered HTTP 503; "
        "it may be overloaded or down"
    )


def test_a_server_that_answers_something_else_than_mcp_is_a_final_error(site):
    site.route("/mcp", Reply(200, "<html>hello</html>", {"Content-Type": "text/html"}))
    with pytest.raises(ToolError) as raised:
        call(site.url("/mcp"))
    assert not isinstance(raised.value, TransientToolError)
    assert str(raised.value).startswith("the MCP server 'docs' answered with error")
    assert "Unexpected content type: text/html" in str(raised.value)


def test_the_sdk_may_not_be_sent_to_another_origin(site):
    async def fetch_elsewhere() -> None:
        async with guarded_client(check_url(site.url("/mcp")), headers={}, timeout_s=5) as client:
            await client.get("http://example.com/mcp")

    with pytest.raises(LeftOrigin) as raised:
        run_blocking(fetch_elsewhere, timeout_s=5)
    assert "another origin" in str(raised.value) and site.requests == []


@pytest.mark.parametrize(
    ("error", "kind", "text"),
    [
        (MCPError(INVALID_PARAMS, "q is required"), ToolArgumentError,
         "the MCP server 'docs' refused the arguments: q is required"),
        (MCPError(METHOD_NOT_FOUND, "Not Found"), ToolError,
         "the MCP server 'docs' does not know this request (Not Found); the operator should check the server's "
         "URL and transport"),
        (MCPError(REQUEST_TIMEOUT, "timed out"), TransientToolError,
         "the MCP server 'docs' did not answer within 5 seconds"),
        (MCPError(INTERNAL_ERROR, "boom"), ToolError, "the MCP server 'docs' answered with error -32603: boom"),
        (httpx2.ReadTimeout("slow"), TransientToolError,
         "the MCP server 'docs' did not answer within 5 seconds"),
        (httpx2.ConnectError("All connection attempts failed"), TransientToolError,
         "could not reach the MCP server 'docs' (All connection attempts failed); it may be down"),
        (RuntimeError("odd"), ToolError, "talking to the MCP server 'docs' failed (RuntimeError: odd)"),
    ],
)
def test_each_failure_maps_to_its_error_type_even_inside_exception_groups(error, kind, text):
    for raised in (error, ExceptionGroup("outer", [ExceptionGroup("inner", [error])])):
        mapped = failure_of(raised, server="docs", timeout_s=5)
        assert type(mapped) is kind and str(mapped) == text


def test_the_http_status_behind_the_transports_generic_error_is_named():
    statuses = HttpStatuses(seen=[403])
    mapped = failure_of(MCPError(INTERNAL_ERROR, "Server returned an error response"), server="docs",
                        statuses=statuses)
    assert str(mapped).startswith("the MCP server 'docs' refused the request (HTTP 403)")


def test_an_answer_that_breaks_the_protocol_is_said_plainly():
    class Shape(BaseModel):
        x: int

    with pytest.raises(ValidationError) as invalid:
        Shape.model_validate({"x": "not a number"})
    mapped = failure_of(invalid.value, server="docs")
    assert str(mapped) == "the MCP server 'docs' sent an answer that is not valid MCP"


def test_cancellation_is_not_mistaken_for_the_cause():
    group = BaseExceptionGroup("g", [asyncio.CancelledError(), MCPError(INVALID_PARAMS, "bad")])
    assert isinstance(failure_of(group, server="docs"), ToolArgumentError)
