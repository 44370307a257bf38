"""Names models see: <server>__<tool>, valid for every provider, unique in the
catalog (a taken name stays with its owner and the MCP tool is left out and
logged), and the allow-list."""

from __future__ import annotations

import logging

import pytest
from django.core.exceptions import ValidationError

from chatforge.catalog.catalog import get_catalog
from chatforge.catalog.models import ToolDefinition
from chatforge.mcp.models import McpServer
from chatforge.mcp.tools import is_mcp_tool, server_tools

pytestmark = pytest.mark.django_db


def test_tools_are_offered_under_the_servers_name(make_server):
    server = make_server("docs", tools=["search", "fetch"])
    built = server_tools(server)
    assert [tool.name for tool in built.offered] == ["docs__search", "docs__fetch"]
    assert built.left_out == []
    catalog = get_catalog(fresh=True)
    assert {"docs__search", "docs__fetch"} <= set(catalog.names())
    assert is_mcp_tool(catalog.get("docs__search")) and not is_mcp_tool(catalog.get("echo"))
    assert catalog.get("docs__search").description == "The search tool."


@pytest.mark.parametrize("name", ["has__double", "_leading", "trailing_", "sp ace", "dot.ted", "x" * 33])
def test_a_server_name_that_would_make_names_ambiguous_or_invalid_is_refused(name):
    server = McpServer(name=name, url="https://mcp.example.com/mcp")
    with pytest.raises(ValidationError) as raised:
        server.full_clean()
    assert "name" in raised.value.message_dict


def test_a_tool_whose_full_name_is_not_valid_for_models_is_left_out_with_the_reason(make_server):
    server = make_server("docs", tools=["search", "pages.get", "y" * 60])
    built = server_tools(server)
    assert [tool.name for tool in built.offered] == ["docs__search"]
    reasons = {item.name: item.reason for item in built.left_out}
    assert reasons["pages.get"] == (
        "'docs__pages.get' is not a usable tool name: models accept 1-64 characters from a-z, A-Z, 0-9, "
        "'_' and '-'"
    )
    assert "is not a usable tool name" in reasons["y" * 60]
    assert "docs__pages.get" not in get_catalog(fresh=True).names()


def test_a_name_taken_by_a_data_tool_stays_with_it_and_the_collision_is_logged(make_server, caplog):
    ToolDefinition.objects.create(name="docs__search", description="Mine.", kind="mock",
                                  parameters={"type": "object"}, mock_response={"mine": True})
    make_server("docs", tools=["search", "fetch"])
    with caplog.at_level(logging.ERROR, logger="chatforge.mcp.catalog"):
        catalog = get_catalog(fresh=True)
    assert not is_mcp_tool(catalog.get("docs__search")) and catalog.get("docs__search").description == "Mine."
    assert is_mcp_tool(catalog.get("docs__fetch"))
    assert "MCP tool 'docs__search' of server 'docs' is shadowed by another tool" in caplog.text


def test_two_servers_never_collide_because_names_cannot_hold_the_separator(make_server):
    make_server("a", tools=["b__c"])
    make_server("a_b", tools=["c"])
    catalog = get_catalog(fresh=True)
    assert is_mcp_tool(catalog.get("a__b__c")) and is_mcp_tool(catalog.get("a_b__c"))


def test_the_allow_list_offers_only_the_named_tools(make_server):
    server = make_server("docs", tools=["search", "fetch", "delete"], allowed_tools=["search", "fetch"])
    built = server_tools(server)
    assert [tool.name for tool in built.offered] == ["docs__search", "docs__fetch"]
    assert [(item.name, item.reason, item.by_choice) for item in built.left_out] == [
        ("delete", "not in the server's allow-list", True)
    ]
    assert "docs__delete" not in get_catalog(fresh=True).names()


def test_an_empty_allow_list_offers_every_tool(make_server):
    server = make_server("docs", tools=["search", "delete"], allowed_tools=[])
    assert len(server_tools(server).offered) == 2


def test_a_disabled_server_offers_nothing(make_server):
    make_server("docs", tools=["search"], enabled=False)
    assert "docs__search" not in get_catalog(fresh=True).names()


def test_disabled_tools_setting_leaves_mcp_tools_out_too(make_server, settings):
    settings.CHATFORGE_DISABLED_TOOLS = ["docs__search"]
    make_server("docs", tools=["search", "fetch"])
    names = get_catalog(fresh=True).names()
    assert "docs__search" not in names and "docs__fetch" in names


def test_a_schema_that_is_not_an_object_schema_is_left_out(make_server):
    server = make_server("docs", tools=["search"])
    server.discovered_tools[0]["input_schema"] = {"type": "string"}
    built = server_tools(server)
    assert built.offered == []
    assert built.left_out[0].reason.startswith("its input schema cannot be used:")
