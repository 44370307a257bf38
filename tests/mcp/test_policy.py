"""The server's policy and per-tool overrides become each tool's ToolPolicy,
which the executor and the approval engine read; bad overrides are refused
before a save."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from chatforge.catalog.catalog import get_catalog
from chatforge.mcp.models import McpServer
from tools.base import ToolPolicy

pytestmark = pytest.mark.django_db


def test_every_tool_gets_the_servers_policy_unless_overridden(make_server):
    make_server(
        "docs", tools=["search", "delete"], timeout_s=12, max_attempts=3, side_effects="read_only", pool="io",
        tool_overrides={"delete": {"side_effects": "not_idempotent", "requires_approval": True,
                                   "max_attempts": 1, "timeout_s": 60, "pool": "process"}},
    )
    catalog = get_catalog(fresh=True)
    assert catalog.get("docs__search").policy == ToolPolicy(
        timeout_s=12, max_attempts=3, side_effects="read_only", requires_approval=False, pool="io"
    )
    assert catalog.get("docs__delete").policy == ToolPolicy(
        timeout_s=60, max_attempts=1, side_effects="not_idempotent", requires_approval=True, pool="process"
    )


def test_requires_approval_of_the_server_applies_to_all_its_tools(make_server):
    make_server("docs", tools=["search", "fetch"], requires_approval=True,
                tool_overrides={"fetch": {"requires_approval": False}})
    catalog = get_catalog(fresh=True)
    assert catalog.get("docs__search").policy.requires_approval is True
    assert catalog.get("docs__fetch").policy.requires_approval is False


def test_by_default_mcp_tools_are_never_retried():
    server = McpServer(name="docs", url="https://mcp.example.com/mcp")
    assert (server.side_effects, server.max_attempts, server.requires_approval) == ("not_idempotent", 1, False)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ([], "Must be a JSON object"),
        ({"search": "fast"}, "search: must be a JSON object of policy fields"),
        ({"search": {"speed": 1}}, "search: unknown field 'speed'"),
        ({"search": {"timeout_s": "10"}}, "search: 'timeout_s' has the wrong type (str)"),
        ({"search": {"max_attempts": True}}, "search: 'max_attempts' has the wrong type (bool)"),
        ({"search": {"timeout_s": 0}}, "search: timeout_s must be positive"),
        ({"search": {"side_effects": "sometimes"}}, "search: side_effects must be one of"),
        ({"search": {"pool": "gevent"}}, "search: pool must be one of ['io', 'process']"),
    ],
)
def test_bad_overrides_are_refused_with_a_reason(overrides, message):
    server = McpServer(name="docs", url="https://mcp.example.com/mcp", tool_overrides=overrides)
    with pytest.raises(ValidationError) as raised:
        server.full_clean()
    assert any(message in problem for problem in raised.value.message_dict["tool_overrides"]), raised.value


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"url": "ftp://mcp.example.com"}, "url", "http:// or https://"),
        ({"url": "https://mcp.example.com/${TENANT}/mcp"}, "url", "Placeholders go in headers"),
        ({"headers": {"X-Key": 1}}, "headers", "JSON object of strings"),
        ({"headers": {"Bad Header": "x"}}, "headers", "Not a valid header name"),
        ({"allowed_tools": "search"}, "allowed_tools", "JSON list"),
        ({"timeout_s": 0}, "timeout_s", "more than 0"),
        ({"max_attempts": 0}, "max_attempts", "At least 1"),
    ],
)
def test_each_field_is_checked_before_a_save(fields, field, message):
    server = McpServer(name="docs", url=fields.pop("url", "https://mcp.example.com/mcp"), **fields)
    with pytest.raises(ValidationError) as raised:
        server.full_clean()
    assert any(message in problem for problem in raised.value.message_dict[field]), raised.value


def test_the_approval_engine_reads_requires_approval_of_mcp_tools(make_server):
    from orchestration.services.approval_policy import tools_needing_approval

    make_server("docs", tools=["search", "delete"], tool_overrides={"delete": {"requires_approval": True}})
    catalog = get_catalog(fresh=True)
    assert tools_needing_approval(catalog, ["docs__search", "docs__delete"], assistant=None) == ["docs__delete"]
