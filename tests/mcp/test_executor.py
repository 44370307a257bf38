"""MCP tools are ordinary tools to the executor: a discovered server's tools
run through ``execute_tool`` with its timeouts, retries, secret scrubbing and
error texts, exactly as in a run."""

from __future__ import annotations

import time

import pytest

from chatforge.catalog.catalog import get_catalog
from chatforge.mcp.discovery import discover
from tests.support.mcp_server import BEARER_TOKEN
from tools.base import ToolContext
from tools.executor import execute_tool

pytestmark = pytest.mark.django_db


@pytest.fixture
def discovered(mcp_server, make_server):
    server = make_server(
        "testmcp",
        url=mcp_server.url,
        headers={"Authorization": "Bearer ${MCP_TEST_TOKEN}"},
        timeout_s=10,
        tool_overrides={"hang": {"timeout_s": 1}},
    )
    assert discover(server).ok, server.discovery_error
    return server


def context_with_secrets(**secrets: str) -> ToolContext:
    return ToolContext(user_id=1, secret_lookup=secrets.get)


def test_a_successful_call(discovered):
    result = execute_tool(get_catalog(fresh=True), "testmcp__add", {"a": 2, "b": 40},
                          context=context_with_secrets(mcp_test_token=BEARER_TOKEN))
    assert result.status == "success" and result.result == {"result": 42}
    assert result.output_text() == '{"result":42}'


def test_an_is_error_result_reaches_the_model_as_an_error_with_guidance(discovered):
    result = execute_tool(get_catalog(fresh=True), "testmcp__fail", {"reason": "the page is gone"},
                          context=context_with_secrets(mcp_test_token=BEARER_TOKEN))
    assert result.status == "error" and result.retryable_by_model
    assert result.error == (
        "Error executing tool 'testmcp__fail': the MCP server 'testmcp' reported that the tool failed: "
        "Error executing tool fail: cannot do that: the page is gone. Please check the arguments and try again."
    )


def test_a_hung_call_is_cut_at_the_tools_own_timeout(discovered):
    started = time.monotonic()
    result = execute_tool(get_catalog(fresh=True), "testmcp__hang", {"seconds": 30},
                          context=context_with_secrets(mcp_test_token=BEARER_TOKEN))
    assert result.status == "timeout"
    assert result.error == "Error: Tool 'testmcp__hang' timed out after 1 seconds."
    assert time.monotonic() - started < 5


def test_the_bearer_token_comes_from_the_users_secret_and_is_scrubbed(discovered):
    result = execute_tool(get_catalog(fresh=True), "testmcp__whoami", {},
                          context=context_with_secrets(mcp_test_token=BEARER_TOKEN))
    assert result.status == "success"
    assert result.result == {"result": "authorized as the token holder (the request carried Bearer [redacted])"}
    assert BEARER_TOKEN not in result.output_text()


def test_without_the_users_secret_the_call_says_which_secret_to_add(discovered):
    result = execute_tool(get_catalog(fresh=True), "testmcp__whoami", {}, context=context_with_secrets())
    assert result.status == "error"
    assert result.error == (
        "Error executing tool 'testmcp__whoami': this tool needs ${MCP_TEST_TOKEN}, which is not set: the user "
        "can add a secret named 'mcp_test_token' (an operator's value needs the placeholder "
        "${TOOL_MCP_TEST_TOKEN} and the environment variable TOOL_MCP_TEST_TOKEN: only TOOL_ variables are read)"
    )


def test_arguments_are_checked_strictly_against_the_servers_schema_before_any_call(discovered):
    result = execute_tool(get_catalog(fresh=True), "testmcp__add", {"a": 1, "b": 2, "c": 3},
                          context=context_with_secrets(mcp_test_token=BEARER_TOKEN))
    assert result.status == "error" and result.retryable_by_model and result.attempts == 0
    assert result.error.startswith("Error: Invalid arguments for tool 'testmcp__add'")
    assert "'c'" in result.error
