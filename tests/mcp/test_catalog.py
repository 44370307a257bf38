"""MCP tools in the catalog and everywhere it is read: GET /api/tools/, the
chat page's tool picker, the tool testing page, the assistant form, and
running one by hand through the API."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from rest_framework.test import APIClient

from chatforge.accounts.secrets import user_secret_set
from chatforge.mcp.discovery import discover
from tests.support.mcp_server import BEARER_TOKEN

pytestmark = pytest.mark.django_db


def page_data(response) -> dict:
    html = response.content.decode()
    marker = '<script id="page-data" type="application/json">'
    start = html.index(marker) + len(marker)
    return json.loads(html[start:html.index("</script>", start)])


def test_the_tools_api_lists_mcp_tools_with_their_kind_and_policy(make_server, make_user):
    make_server("docs", tools=["search"], timeout_s=20, requires_approval=True)
    _, token = make_user()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    listed = {tool["name"]: tool for tool in client.get("/api/tools/").json()}
    assert listed["docs__search"]["kind"] == "mcp"
    assert listed["docs__search"]["description"] == "The search tool."
    assert listed["docs__search"]["parameters"]["required"] == ["q"]
    assert listed["docs__search"]["policy"] == {
        "timeout_s": 20.0, "max_attempts": 1, "side_effects": "not_idempotent", "requires_approval": True,
        "pool": "process", "sandboxed": False, "cache_ttl_s": 0.0,
    }
    assert listed["calculator"]["kind"] == "code"


def test_the_chat_and_tool_testing_pages_offer_mcp_tools(make_server, django_user_model):
    make_server("docs", tools=["search"])
    client = Client()
    client.force_login(django_user_model.objects.create_user(username="web", password="pw"))
    chat_tools = {t["name"]: t for t in page_data(client.get("/"))["tools"]}
    assert chat_tools["docs__search"] == {
        "name": "docs__search", "description": "The search tool.", "kind": "mcp"
    }
    testing_tools = {t["name"]: t for t in page_data(client.get("/tools/testing/"))["tools"]}
    assert testing_tools["docs__search"]["kind"] == "mcp"


def test_the_assistant_form_lets_an_admin_pick_mcp_tools(make_server, admin_client):
    make_server("docs", tools=["search"])
    response = admin_client.get("/admin/catalog/assistant/add/")
    assert ("docs__search", "docs__search") in response.context["adminform"].form.fields["tools"].choices


def test_staff_can_run_an_mcp_tool_through_the_api_with_their_own_secret(mcp_server, make_server, make_user):
    server = make_server("testmcp", url=mcp_server.url, headers={"Authorization": "Bearer ${MCP_TEST_TOKEN}"})
    assert discover(server).ok
    user, token = make_user()
    user.is_staff = True
    user.save()
    user.user_permissions.add(Permission.objects.get(codename="change_tooldefinition"))
    user_secret_set(user=user, name="mcp_test_token", value=BEARER_TOKEN)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    answer = client.post("/api/tools/testmcp__whoami/invoke/", {"arguments": {}}, format="json").json()
    assert answer["success"] is True, answer
    assert answer["result"] == {
        "result": "authorized as the token holder (the request carried Bearer [redacted])"
    }
