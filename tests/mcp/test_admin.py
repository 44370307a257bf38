"""Registering MCP servers in the admin: saving lists the server's tools, the
server's page shows them (or why not) with their policy and schema, and
"Refresh tools now" asks again, as a list action and as a button."""

from __future__ import annotations

import html
import json

import pytest
from django.contrib.messages import get_messages

from chatforge.catalog.models import ToolDefinition
from chatforge.mcp.models import McpServer
from tests.mcp.conftest import UNRESOLVABLE_URL, allowed_private
from tests.support.admin_pages import page_text
from tests.support.mcp_server import TOOL_NAMES
from tests.support.stack import free_port

pytestmark = pytest.mark.django_db

ADD_URL = "/admin/mcp/mcpserver/add/"


def server_form(**overrides: str) -> dict[str, str]:
    """The add form as a browser posts it (JSON fields as text)."""
    data = {
        "name": "testmcp", "url": UNRESOLVABLE_URL, "transport": "streamable_http", "enabled": "on",
        "headers": "{}", "allowed_tools": "[]", "timeout_s": "30", "max_attempts": "1",
        "backoff_initial_s": "0.5", "backoff_max_s": "8", "side_effects": "not_idempotent", "pool": "process",
        "tool_overrides": "{}",
    }
    data.update(overrides)
    return data


def messages_of(response) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def test_saving_a_server_lists_its_tools_and_its_page_shows_them(admin_client, mcp_server):
    created = admin_client.post(ADD_URL, server_form(
        url=mcp_server.url,
        headers=json.dumps({"Authorization": "Bearer ${MCP_TEST_TOKEN}"}),
        allowed_tools=json.dumps(["add", "fail", "hang", "whoami"]),
        tool_overrides=json.dumps({"hang": {"timeout_s": 1, "requires_approval": True}}),
    ))
    assert created.status_code == 302, created.context["adminform"].form.errors
    server = McpServer.objects.get(name="testmcp")
    assert {tool["name"] for tool in server.discovered_tools} == set(TOOL_NAMES)
    assert f"The MCP server testmcp lists {len(TOOL_NAMES)} tool(s)." in messages_of(created)

    page = page_text(admin_client.get(f"/admin/mcp/mcpserver/{server.pk}/change/"))
    start = page.index('id="mcp-discovered-tools"')
    table = page[start:page.index("</table>", start)]
    for name in ("add", "fail", "hang", "whoami"):
        assert f'<code class="mcp-tool-name">testmcp__{name}</code></td><td>offered to runs' in table
    assert "testmcp__strict_echo</code></td><td>not offered: not in the server's allow-list" in table
    assert "timeout 1 s, 1 attempt(s), not_idempotent, requires approval" in table
    assert "Add two integers." in table and '"required": [\n    "a",\n    "b"\n  ]' in table
    assert "readOnlyHint: True, idempotentHint: True" in table
    assert "Refresh tools now" in page


def test_a_server_that_cannot_be_reached_is_saved_with_the_reason_shown(admin_client):
    port = free_port()  # nothing listens there
    with allowed_private(f"127.0.0.1:{port}"):
        created = admin_client.post(ADD_URL, server_form(url=f"http://127.0.0.1:{port}/mcp"))
    assert created.status_code == 302
    prefix = "Could not list the tools of the MCP server testmcp: "
    [warning] = [m for m in messages_of(created) if m.startswith(prefix)]
    assert "could not reach the MCP server 'testmcp'" in warning
    server = McpServer.objects.get(name="testmcp")
    page = page_text(admin_client.get(f"/admin/mcp/mcpserver/{server.pk}/change/"))
    assert "last discovery error" in page.lower() and "could not reach the MCP server" in page
    assert "None yet: save the server or use “Refresh tools now”." in page


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:9/mcp", "127.0.0.1 is a loopback address"),
        ("http://localhost:9/mcp", "localhost resolves to 127.0.0.1, a loopback address"),
        ("https://10.0.0.5/mcp", "10.0.0.5 is a private address"),
        ("http://169.254.169.254/latest/mcp", "169.254.169.254 is the cloud metadata address"),
        ("http://[::ffff:192.168.1.10]/mcp", "a private address (192.168.1.10) in IPv6 form"),
    ],
)
def test_a_server_on_an_address_tools_may_not_reach_cannot_be_registered(admin_client, url, reason):
    response = admin_client.post(ADD_URL, server_form(url=url))

    assert response.status_code == 200
    [error] = response.context["adminform"].form.errors["url"]
    assert error.startswith("This server cannot be registered: refusing to fetch ")
    assert f"{reason}, which tools may not reach." in error
    assert error.endswith("A server on an internal network needs its host:port in "
                          "CHATFORGE_TOOLS_ALLOWED_PRIVATE_HOSTS.")
    assert html.escape(error, quote=False) in response.content.decode()
    assert not McpServer.objects.exists()


def test_a_host_port_the_operator_allows_can_be_registered(admin_client):
    port = free_port()
    refused = admin_client.post(ADD_URL, server_form(url=f"http://127.0.0.1:{port}/mcp"))
    assert refused.status_code == 200 and not McpServer.objects.exists()

    with allowed_private(f"127.0.0.1:{port}"):
        created = admin_client.post(ADD_URL, server_form(url=f"http://127.0.0.1:{port}/mcp"))
    assert created.status_code == 302
    assert McpServer.objects.get(name="testmcp").url == f"http://127.0.0.1:{port}/mcp"


def test_changing_a_server_to_a_forbidden_address_is_refused(admin_client, make_server):
    server = make_server("testmcp", tools=["search"])
    response = admin_client.post(f"/admin/mcp/mcpserver/{server.pk}/change/",
                                 server_form(url="http://10.1.2.3/mcp"))
    assert response.status_code == 200
    assert "10.1.2.3 is a private address" in response.context["adminform"].form.errors["url"][0]
    server.refresh_from_db()
    assert server.url == UNRESOLVABLE_URL and [tool["name"] for tool in server.discovered_tools] == ["search"]


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"name": "two__parts"}, "name", "single '_' between words"),
        ({"url": "mcp.example.com"}, "url", "http:// or https://"),
        ({"headers": '{"X-Key": 5}'}, "headers", "JSON object of strings"),
        ({"tool_overrides": '{"search": {"timeout_s": -1}}'}, "tool_overrides", "timeout_s must be positive"),
    ],
)
def test_mistakes_are_shown_next_to_their_field(admin_client, overrides, field, message):
    response = admin_client.post(ADD_URL, server_form(**overrides))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert any(message in error for error in errors[field]), errors
    assert not McpServer.objects.exists()


def test_refresh_now_action_asks_the_selected_servers_again(admin_client, mcp_server):
    server = McpServer.objects.create(name="testmcp", url=mcp_server.url)
    response = admin_client.post(
        "/admin/mcp/mcpserver/", {"action": "refresh_now", "_selected_action": [server.pk]}, follow=True
    )
    assert f"The MCP server testmcp lists {len(TOOL_NAMES)} tool(s)." in messages_of(response)
    assert len(McpServer.objects.get(pk=server.pk).discovered_tools) == len(TOOL_NAMES)
    listing = page_text(admin_client.get("/admin/mcp/mcpserver/"))
    assert f"{len(TOOL_NAMES)} of {len(TOOL_NAMES)}" in listing


def test_the_refresh_button_posts_and_comes_back_to_the_page(admin_client, mcp_server):
    server = McpServer.objects.create(name="testmcp", url=mcp_server.url)
    url = f"/admin/mcp/mcpserver/{server.pk}/refresh/"
    assert admin_client.get(url).status_code == 405
    response = admin_client.post(url)
    assert response.status_code == 302 and response["Location"] == f"/admin/mcp/mcpserver/{server.pk}/change/"
    assert len(McpServer.objects.get(pk=server.pk).discovered_tools) == len(TOOL_NAMES)
    assert admin_client.post("/admin/mcp/mcpserver/999999/refresh/").status_code == 404


def test_the_page_says_when_another_tool_holds_a_name(admin_client, make_server):
    ToolDefinition.objects.create(name="docs__search", description="Mine.", kind="mock",
                                  parameters={"type": "object"}, mock_response={})
    server = make_server("docs", tools=["search", "fetch"])
    page = page_text(admin_client.get(f"/admin/mcp/mcpserver/{server.pk}/change/"))
    assert "docs__search</code></td><td>not offered: another tool already has this name" in page
    assert "docs__fetch</code></td><td>offered to runs" in page


def test_staff_without_the_change_permission_cannot_refresh(client, django_user_model, make_server):
    from django.contrib.auth.models import Permission

    server = make_server("docs", tools=["search"])
    viewer = django_user_model.objects.create_user(username="viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_mcpserver"))
    client.force_login(viewer)
    assert client.get(f"/admin/mcp/mcpserver/{server.pk}/change/").status_code == 200
    assert client.post(f"/admin/mcp/mcpserver/{server.pk}/refresh/").status_code == 403


def test_pointing_a_server_elsewhere_drops_the_list_of_the_old_one(admin_client, make_server):
    server = make_server("testmcp", tools=["search"])
    changed = admin_client.post(f"/admin/mcp/mcpserver/{server.pk}/change/",
                                server_form(url="http://elsewhere.invalid/mcp"))
    assert changed.status_code == 302
    server.refresh_from_db()
    assert server.discovered_tools == [] and server.discovered_at is None
    assert "could not resolve elsewhere.invalid" in server.discovery_error


def test_saving_other_fields_keeps_the_list(admin_client, make_server):
    server = make_server("testmcp", tools=["search"])
    admin_client.post(f"/admin/mcp/mcpserver/{server.pk}/change/", server_form(timeout_s="12"))
    server.refresh_from_db()
    assert [tool["name"] for tool in server.discovered_tools] == ["search"] and server.timeout_s == 12


def test_an_mcp_tool_can_be_run_by_hand_from_the_admin(admin_client, mcp_server, make_server):
    from chatforge.mcp.discovery import discover
    from tests.admin.test_tools_admin import result_json

    assert discover(make_server("handy", url=mcp_server.url, enabled=False)).ok
    url = "/admin/catalog/tooldefinition/run/handy__add/"
    page = page_text(admin_client.get(url))
    assert "(mcp tool)" in page and "The MCP server 'handy' is disabled" in page

    result = result_json(admin_client.post(url, {"arguments": '{"a": 40, "b": 2}'}))

    assert result["success"] is True and result["tool_name"] == "handy__add", result
    assert admin_client.get("/admin/catalog/tooldefinition/run/handy__nope/").status_code == 404
