"""Discovery: tools/list stored on the server's row, refreshed after the TTL
by one process only (through a task on the tools queue), failures recorded
without losing the last good list, secrets scrubbed from what is stored."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from chatforge.catalog.catalog import get_catalog
from chatforge.mcp import discovery
from chatforge.mcp.discovery import claim_refresh, discover, discover_if_due, is_due
from chatforge.mcp.models import McpServer
from chatforge.mcp.tasks import mcp_discover
from tests.support.mcp_server import TOOL_NAMES
from tools.errors import ToolError
from tools.net import guard, policy

pytestmark = pytest.mark.django_db


def test_discovery_stores_every_tool_with_its_schema(mcp_server, make_server):
    server = make_server("testmcp", url=mcp_server.url)
    outcome = discover(server)
    assert outcome.ok and outcome.tool_count == len(TOOL_NAMES)
    stored = McpServer.objects.get(pk=server.pk)
    by_name = {tool["name"]: tool for tool in stored.discovered_tools}
    assert set(by_name) == set(TOOL_NAMES)
    assert by_name["add"]["description"] == "Add two integers."
    assert by_name["add"]["input_schema"]["properties"]["a"]["type"] == "integer"
    assert by_name["add"]["annotations"] == {"readOnlyHint": True, "idempotentHint": True}
    assert stored.discovered_at is not None and stored.discovery_attempted_at == stored.discovered_at
    assert stored.discovery_error == ""
    assert {"testmcp__add", "testmcp__hang"} <= set(get_catalog(fresh=True).names())


def test_a_changed_list_counts_as_a_catalog_change_and_the_same_list_does_not(mcp_server, make_server):
    from chatforge.catalog.models import CatalogVersion

    def version() -> int:
        return CatalogVersion.objects.filter(pk=1).values_list("value", flat=True).first() or 0

    server = make_server("testmcp", url=mcp_server.url)
    before = version()
    assert discover(server).ok
    assert version() == before + 1  # the tools appeared
    assert discover(server).ok
    assert version() == before + 1  # a refresh that found the same list


def test_a_failed_discovery_keeps_the_last_good_list_and_records_why(make_server):
    from tests.support.stack import free_port

    port = free_port()
    policy.configure(allowed_private_hosts=[f"127.0.0.1:{port}"])
    try:
        server = make_server("docs", tools=["search"], url=f"http://127.0.0.1:{port}/mcp")
        outcome = discover(server)
    finally:
        policy.configure(allowed_private_hosts=[])
    assert not outcome.ok and outcome.tool_count == 1
    stored = McpServer.objects.get(pk=server.pk)
    assert stored.discovery_error.startswith("could not reach the MCP server 'docs' (")
    assert [tool["name"] for tool in stored.discovered_tools] == ["search"]
    assert "docs__search" in get_catalog(fresh=True).names()


def test_a_server_the_guard_refuses_is_not_asked_at_all(make_server):
    # Saved while its host:port was allowed; the allowance is gone when it is
    # listed: the guard is applied again at every connection.
    policy.configure(allowed_private_hosts=["127.0.0.1:9"])
    try:
        server = make_server("local", url="http://127.0.0.1:9/mcp")
    finally:
        policy.configure(allowed_private_hosts=[])
    outcome = discover(server)
    assert not outcome.ok
    assert "127.0.0.1 is a loopback address, which tools may not reach" in outcome.error


def test_a_host_that_resolves_elsewhere_after_the_save_is_refused_when_connecting(make_server, monkeypatch):
    """DNS rebinding: the host resolved to a public address when the row was
    checked, and to loopback when discovery connects."""
    answers = {"mcp.rebinding.example": ["93.184.215.14"]}
    monkeypatch.setattr(guard, "_resolve", lambda host, port: answers[host])
    server = make_server("rebound", url="http://mcp.rebinding.example/mcp")

    answers["mcp.rebinding.example"] = ["127.0.0.1"]
    outcome = discover(server)

    assert not outcome.ok
    assert "mcp.rebinding.example resolves to 127.0.0.1, a loopback address, which tools may not reach" in (
        outcome.error
    )


def test_values_filled_into_headers_are_scrubbed_from_the_stored_error(make_server, monkeypatch):
    monkeypatch.setenv("TOOL_DOCS_KEY", "operator-key-456")

    async def echoing_failure(config, *, headers, timeout_s):
        raise ToolError(f"the server said: bad key {headers['X-Key']}")

    monkeypatch.setattr(discovery, "list_tools", echoing_failure)
    server = make_server("docs", headers={"X-Key": "${TOOL_DOCS_KEY}", "Authorization": "Bearer ${DOCS_TOKEN}"})
    outcome = discover(server)
    assert outcome.error == (
        "the server said: bad key [redacted] (sent without the header(s) Authorization: their placeholders "
        "are filled only for a user's tool calls)"
    )
    assert "operator-key-456" not in McpServer.objects.get(pk=server.pk).discovery_error


def test_a_list_is_due_after_the_ttl_and_exactly_one_claim_wins(make_server, settings):
    settings.CHATFORGE_MCP_DISCOVERY_TTL_S = 60
    server = make_server("docs", tools=["search"])
    now = timezone.now()
    assert not is_due(server, now)
    later = now + timedelta(seconds=61)
    assert is_due(server, later)
    assert claim_refresh(server, later) is True
    # Another process, with the same old row in hand, loses.
    assert claim_refresh(server, later) is False
    assert McpServer.objects.get(pk=server.pk).discovery_attempted_at == later


def test_the_catalog_enqueues_one_refresh_of_a_due_list_on_the_tools_queue(
    make_server, idle_broker, django_capture_on_commit_callbacks
):
    server = make_server("docs", tools=["search"])
    McpServer.objects.filter(pk=server.pk).update(discovery_attempted_at=timezone.now() - timedelta(days=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert "docs__search" in get_catalog(fresh=True).names()
        get_catalog(fresh=True)
    queued = [json.loads(raw) for raw in idle_broker.lrange("tools", 0, -1)]
    assert [(m["headers"]["task"], m["headers"]["argsrepr"]) for m in queued] == [
        ("chatforge.mcp_discover", f"[{server.pk}]")
    ]


def test_the_background_task_discovers_a_due_server(mcp_server, make_server):
    server = make_server("testmcp", url=mcp_server.url)
    mcp_discover(server.pk)
    assert len(McpServer.objects.get(pk=server.pk).discovered_tools) == len(TOOL_NAMES)


def test_the_task_skips_work_no_longer_wanted(make_server, monkeypatch):
    asked: list[str] = []
    monkeypatch.setattr(discovery, "discover", lambda server: asked.append(server.name))
    fresh = make_server("fresh", tools=["search"])
    off = make_server("off", enabled=False)
    assert discover_if_due(server_id=fresh.pk) is None
    assert discover_if_due(server_id=off.pk) is None
    assert discover_if_due(server_id=10**9) is None
    assert asked == []
