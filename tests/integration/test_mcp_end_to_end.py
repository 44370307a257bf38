"""MCP servers as tool sources, through the real workers.

A real MCP server (the SDK's own server side, tests/support/mcp_server.py)
is registered through the admin's add form, as an operator would; a run on
the distributed stack has the (fake) model call four of its tools - one that
succeeds, one that reports an error, one that hangs past its timeout and one
that needs the user's bearer token - and each result reaches the events, the
model's next turn and the stored message, explained, with the token
scrubbed. A server nobody discovered yet is refreshed in the background by a
tools worker.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from chatforge.accounts.secrets import user_secret_set
from chatforge.conversations.models import Message, ToolInvocation
from chatforge.mcp.models import McpServer
from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient, follow_run
from tests.support.mcp_server import BEARER_TOKEN, TOOL_NAMES, RunningMcpServer, shared_server
from tools.net import policy

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TOOLS = ["testmcp__add", "testmcp__fail", "testmcp__hang", "testmcp__whoami"]


@pytest.fixture
def mcp_server() -> Iterator[RunningMcpServer]:
    """The test server; the stack's processes may reach it (tests/conftest.py),
    and so may this process (the admin's discovery) while the test runs."""
    running = shared_server()
    policy.configure(allowed_private_hosts=[running.host_port])
    yield running
    policy.configure(allowed_private_hosts=[])


def outputs(events: list[dict]) -> dict[str, dict]:
    names = {e["data"]["id"]: e["data"]["name"] for e in events if e["type"] == "tool_call"}
    return {names[e["data"]["tool_call_id"]]: e["data"] for e in events if e["type"] == "tool_output"}


def register_in_admin(admin_client, server: RunningMcpServer) -> McpServer:
    created = admin_client.post("/admin/mcp/mcpserver/add/", {
        "name": "testmcp", "url": server.url, "transport": "streamable_http", "enabled": "on",
        "headers": json.dumps({"Authorization": "Bearer ${MCP_TEST_TOKEN}"}),
        "allowed_tools": "[]", "timeout_s": "10", "max_attempts": "1", "backoff_initial_s": "0.5",
        "backoff_max_s": "8", "side_effects": "read_only", "pool": "process",
        # Two of its tools on the I/O pool (decision 0025): MCP calls there too,
        # and the hung one cancelled at its timeout on a thread.
        "tool_overrides": json.dumps({"hang": {"timeout_s": 1, "pool": "io"}, "add": {"pool": "io"}}),
    })
    assert created.status_code == 302, created.context["adminform"].form.errors
    registered = McpServer.objects.get(name="testmcp")
    assert registered.discovery_error == ""
    return registered


def test_a_run_calls_each_kind_of_mcp_tool_through_the_workers(
    stack, fake_llm, make_user, admin_client, mcp_server
):
    server = register_in_admin(admin_client, mcp_server)
    page = admin_client.get(f"/admin/mcp/mcpserver/{server.pk}/change/").content.decode()
    for name in TOOL_NAMES:
        assert f'<code class="mcp-tool-name">testmcp__{name}</code></td><td>offered to runs' in page

    user, token = make_user()
    user_secret_set(user=user, name="mcp_test_token", value=BEARER_TOKEN)
    fake_llm.add_script("e2e-mcp", [
        Reply(text="Asking the server.", tool_calls=[
            ("testmcp__add", {"a": 20, "b": 22}),
            ("testmcp__fail", {"reason": "no such page"}),
            ("testmcp__hang", {"seconds": 30}),
            ("testmcp__whoami", {}),
        ]),
        Reply(text="20 + 22 is 42; the page is gone; the slow tool timed out; you are the token holder."),
    ])
    api = ApiClient(stack.http_url, token)
    accepted = api.post_message(api.new_conversation(), "use the MCP tools", model="e2e-mcp", tools=TOOLS)

    events = follow_run(stack.ws_url, accepted["run_id"], token)

    assert events[-1]["type"] == "run.completed", stack.logs()
    out = outputs(events)
    assert out["testmcp__add"]["status"] == "success", out
    assert json.loads(out["testmcp__add"]["output"]) == {"result": 42}
    assert out["testmcp__fail"]["status"] == "error"
    assert out["testmcp__fail"]["output"] == (
        "Error executing tool 'testmcp__fail': the MCP server 'testmcp' reported that the tool failed: "
        "Error executing tool fail: cannot do that: no such page. Please check the arguments and try again."
    )
    assert out["testmcp__hang"]["status"] == "timeout"
    assert out["testmcp__hang"]["output"] == "Error: Tool 'testmcp__hang' timed out after 1 seconds."
    assert out["testmcp__whoami"]["status"] == "success", out
    assert json.loads(out["testmcp__whoami"]["output"]) == {
        "result": "authorized as the token holder (the request carried Bearer [redacted])"
    }
    statuses = dict(ToolInvocation.objects.filter(run_id=accepted["run_id"]).values_list("name", "status"))
    assert statuses == {"testmcp__add": "success", "testmcp__fail": "error", "testmcp__hang": "timeout",
                        "testmcp__whoami": "success"}
    workers = {name: worker.partition("@")[0] for name, worker in
               ToolInvocation.objects.filter(run_id=accepted["run_id"]).values_list("name", "worker")}
    assert workers == {"testmcp__add": "tools-io", "testmcp__fail": "tools", "testmcp__hang": "tools-io",
                       "testmcp__whoami": "tools"}
    # The model read every result on its next turn, and the message keeps them, token-free.
    second_turn = fake_llm.requests_for("e2e-mcp")[-1]["messages"]
    tool_messages = [m["content"] for m in second_turn if m["role"] == "tool"]
    assert len(tool_messages) == 4 and any('"result":42' in content for content in tool_messages)
    message = Message.objects.get(run_id=accepted["run_id"], role="assistant")
    assert {r["name"] for r in message.tool_rounds[0]["results"]} == set(TOOLS)
    assert BEARER_TOKEN not in json.dumps(message.tool_rounds)
    assert BEARER_TOKEN not in json.dumps(events)


def test_without_the_users_secret_the_bearer_tool_says_which_secret_to_add(
    stack, fake_llm, make_user, admin_client, mcp_server
):
    register_in_admin(admin_client, mcp_server)
    _, token = make_user()  # no mcp_test_token secret
    fake_llm.add_script("e2e-mcp-no-secret", [
        Reply(tool_calls=[("testmcp__whoami", {})]),
        Reply(text="I need your token first."),
    ])
    api = ApiClient(stack.http_url, token)
    accepted = api.post_message(api.new_conversation(), "who am I?", model="e2e-mcp-no-secret",
                                tools=["testmcp__whoami"])

    events = follow_run(stack.ws_url, accepted["run_id"], token)

    assert events[-1]["type"] == "run.completed", stack.logs()
    output = outputs(events)["testmcp__whoami"]
    assert output["status"] == "error"
    assert output["output"] == (
        "Error executing tool 'testmcp__whoami': this tool needs ${MCP_TEST_TOKEN}, which is not set: the user "
        "can add a secret named 'mcp_test_token' (an operator's value needs the placeholder "
        "${TOOL_MCP_TEST_TOKEN} and the environment variable TOOL_MCP_TEST_TOKEN: only TOOL_ variables are read)"
    )


def test_a_server_nobody_listed_yet_is_discovered_by_a_tools_worker(stack, make_user, mcp_server):
    server = McpServer.objects.create(name="testmcp", url=mcp_server.url)  # not through the admin: no discovery
    _, token = make_user()
    api = ApiClient(stack.http_url, token)

    # Reading the catalog (here in the web process) claims the refresh and
    # enqueues it; a tools worker lists the server's tools.
    assert "testmcp__add" not in {t["name"] for t in api.request("GET", "/api/tools/").json()}
    deadline = time.monotonic() + 30
    while not McpServer.objects.get(pk=server.pk).discovered_tools:
        assert time.monotonic() < deadline, stack.logs()
        time.sleep(0.2)

    listed = {t["name"]: t for t in api.request("GET", "/api/tools/").json()}
    assert {f"testmcp__{name}" for name in TOOL_NAMES} <= set(listed)
    assert listed["testmcp__add"]["kind"] == "mcp"
    tools_log = stack.process("tools").log()
    assert "Task chatforge.mcp_discover[" in tools_log and "MCP server testmcp lists 5 tool(s)" in tools_log
