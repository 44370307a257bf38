"""Talking to a real MCP server through the SDK: listing, calling, and each
way a call can fail, as the executor reports it to the model."""

from __future__ import annotations

import pytest

from chatforge.mcp.client import ServerConfig, call_tool, list_tools, run_blocking
from chatforge.mcp.results import tool_output
from tests.mcp.conftest import allowed_private
from tests.support.mcp_server import BEARER_TOKEN, TOOL_NAMES
from tests.support.stack import free_port
from tools.errors import ToolArgumentError, ToolError, TransientToolError


def config_for(url: str, transport: str = "streamable_http", **headers: str) -> ServerConfig:
    return ServerConfig(name="testmcp", url=url, transport=transport, headers=tuple(headers.items()))


def call(config: ServerConfig, tool: str, arguments: dict, headers: dict | None = None, timeout_s: float = 10):
    result = run_blocking(
        lambda: call_tool(config, tool, arguments, headers=headers or {}, timeout_s=timeout_s),
        timeout_s=timeout_s,
    )
    return tool_output(result, server=config.name)


def test_tools_list_returns_every_tool_with_its_schema(mcp_server):
    tools = run_blocking(lambda: list_tools(config_for(mcp_server.url), headers={}, timeout_s=10), timeout_s=10)
    by_name = {tool.name: tool for tool in tools}
    assert set(by_name) == set(TOOL_NAMES)
    assert by_name["add"].description == "Add two integers."
    assert by_name["add"].input_schema["required"] == ["a", "b"]


def test_a_call_returns_the_structured_result(mcp_server):
    assert call(config_for(mcp_server.url), "add", {"a": 2, "b": 3}) == {"result": 5}


def test_the_sse_transport_lists_and_calls_too(sse_server):
    config = config_for(sse_server.url, transport="sse")
    tools = run_blocking(lambda: list_tools(config, headers={}, timeout_s=10), timeout_s=10)
    assert {tool.name for tool in tools} == set(TOOL_NAMES)
    assert call(config, "add", {"a": 40, "b": 2}) == {"result": 42}


def test_an_is_error_result_is_an_error_the_model_can_act_on(mcp_server):
    with pytest.raises(ToolArgumentError) as raised:
        call(config_for(mcp_server.url), "fail", {"reason": "no such page"})
    assert str(raised.value) == (
        "the MCP server 'testmcp' reported that the tool failed: "
        "Error executing tool fail: cannot do that: no such page"
    )


def test_a_json_rpc_invalid_params_error_is_an_argument_error(mcp_server):
    with pytest.raises(ToolArgumentError) as raised:
        call(config_for(mcp_server.url), "strict_echo", {"text": ""})
    assert str(raised.value) == "the MCP server 'testmcp' refused the arguments: text must not be empty"


def test_the_bearer_header_reaches_the_server(mcp_server):
    config = config_for(mcp_server.url)
    answer = call(config, "whoami", {}, headers={"Authorization": f"Bearer {BEARER_TOKEN}"})
    assert answer == {"result": f"authorized as the token holder (the request carried Bearer {BEARER_TOKEN})"}
    with pytest.raises(ToolArgumentError, match="unauthorized"):
        call(config, "whoami", {}, headers={"Authorization": "Bearer wrong"})


def test_an_unreachable_server_is_a_transient_failure():
    port = free_port()  # nothing listens there
    with allowed_private(f"127.0.0.1:{port}"), pytest.raises(TransientToolError) as raised:
        call(config_for(f"http://127.0.0.1:{port}/mcp"), "add", {"a": 1, "b": 2})
    assert str(raised.value).startswith("could not reach the MCP server 'testmcp' (")
    assert str(raised.value).endswith("; it may be down")


def test_the_address_guard_refuses_a_loopback_server_that_is_not_allowed(mcp_server):
    from tools.net import policy

    policy.configure(allowed_private_hosts=[])
    with pytest.raises(ToolError) as raised:
        call(config_for(mcp_server.url), "add", {"a": 1, "b": 2})
    assert "127.0.0.1 is a loopback address, which tools may not reach" in str(raised.value)


def test_a_wrong_path_says_to_check_the_url(mcp_server):
    with pytest.raises(ToolError) as raised:
        call(config_for(mcp_server.url.replace("/mcp", "/nothing")), "add", {"a": 1, "b": 2})
    assert not isinstance(raised.value, TransientToolError)
    assert "HTTP 404" in str(raised.value) and "check the server's URL" in str(raised.value)
