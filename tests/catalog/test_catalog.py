"""Data tools, assistants, switches, the loader and the tools API."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from chatforge.catalog.catalog import get_catalog, unknown_tools_problem
from chatforge.catalog.models import Assistant, ToolDefinition
from chatforge.conversations.models import Conversation, Run
from orchestration.services.runs import RunOptions, run_start
from orchestration.transcript.history import conversation_messages

pytestmark = pytest.mark.django_db

SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "examples": ["Oslo"]}}, "required": ["city"]}


def mock_tool(**overrides) -> ToolDefinition:
    fields = {"name": "fake_weather", "description": "Weather, made up.", "kind": "mock",
              "parameters": SCHEMA, "mock_response": {"temp_c": 12}}
    fields.update(overrides)
    return ToolDefinition(**fields)


def test_a_saved_mock_tool_is_in_the_catalog_and_runs():
    defn = mock_tool()
    defn.full_clean()
    defn.save()
    catalog = get_catalog(fresh=True)
    assert "fake_weather" in catalog.names()
    from tools.executor import execute_tool

    result = execute_tool(catalog, "fake_weather", {"city": "Oslo"})
    assert result.success and result.result == {"temp_c": 12}


@pytest.mark.parametrize(
    ("overrides", "field", "fragment"),
    [
        ({"name": "calculator"}, "name", "already a built-in or code tool"),
        ({"name": "bad name!"}, "__all__", "Invalid tool name"),
        ({"parameters": {"type": "object", "properties": {"x": {"type": "nope"}}}}, "parameters", ""),
        ({"mock_response": None}, "mock_response", "needs the response"),
        ({"kind": "http", "url": "ftp://example.com"}, "url", "http:// or https://"),
        ({"kind": "http", "url": "https://api.example.com", "headers": {"X": 1}}, "headers", "JSON object of strings"),
        ({"kind": "http", "url": "https://api.example.com", "response_path": "$[["}, "response_path", "Not a valid JSONPath"),
        ({"timeout_s": 0}, "timeout_s", "more than 0"),
    ],
)
def test_invalid_definitions_are_refused_on_save(overrides, field, fragment):
    with pytest.raises(ValidationError) as refused:
        mock_tool(**overrides).full_clean()
    errors = refused.value.message_dict
    assert any(fragment in message for messages in errors.values() for message in messages), errors


def test_switches(settings):
    mock_tool(enabled=False).save()
    assert "fake_weather" not in get_catalog(fresh=True).names()
    settings.CHATFORGE_DISABLED_TOOLS = ["echo"]
    assert "echo" not in get_catalog(fresh=True).names()
    settings.CHATFORGE_TOOLS_ENABLED = False
    assert get_catalog(fresh=True).names() == []


def test_load_tools_from_yaml_and_json(tmp_path):
    yaml_file = tmp_path / "tools.yaml"
    yaml_file.write_text(
        "tools:\n"
        "  - name: fake_weather\n    kind: mock\n    description: Weather, made up.\n"
        "    parameters: {type: object, properties: {city: {type: string}}}\n    mock_response: {temp_c: 3}\n"
        "assistants:\n  - name: forecaster\n    system_prompt: You forecast.\n    tools: [fake_weather, get_time]\n"
    )
    call_command("load_tools", str(yaml_file))
    assert ToolDefinition.objects.get(name="fake_weather").mock_response == {"temp_c": 3}
    assert Assistant.objects.get(name="forecaster").tools == ["fake_weather", "get_time"]

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"tools": [{"name": "ok_tool", "kind": "mock", "description": "d",
                                          "parameters": {"type": "object"}, "mock_response": 1},
                                         {"name": "calculator", "kind": "mock", "description": "d",
                                          "parameters": {"type": "object"}, "mock_response": 1}]}))
    with pytest.raises(CommandError, match="already a built-in"):
        call_command("load_tools", str(bad))
    assert not ToolDefinition.objects.filter(name="ok_tool").exists()  # all or nothing


def test_assistant_defaults_and_checks(make_user, idle_broker):
    with pytest.raises(ValidationError, match="JSON list of tool names"):
        Assistant(name="x", tools="calculator").full_clean()
    assert "Unknown tool(s): no_such_tool." in unknown_tools_problem(["calculator", "no_such_tool"])
    assert unknown_tools_problem(["calculator"]) is None
    Assistant.objects.create(name="mathbot", system_prompt="You only do maths.", model="demo",
                             tools=["calculator"], max_iterations=2)
    user, _ = make_user()
    conversation = Conversation.objects.create(user=user)
    run = run_start(user=user, conversation=conversation, content="2+2?", options=RunOptions(assistant="mathbot"))
    assert run.model == "demo"
    assert run.options["tools"] == ["calculator"] and run.options["max_iterations"] == 2
    messages = conversation_messages(Run.objects.select_related("user_message").get(pk=run.pk))
    assert messages[0].role == "system" and messages[0].content == "You only do maths."
    # The request's own choices win over the assistant's.
    run = run_start(user=user, conversation=Conversation.objects.create(user=user), content="time?",
                    options=RunOptions(assistant="mathbot", tools=["get_time"], max_iterations=4))
    assert run.options["tools"] == ["get_time"] and run.options["max_iterations"] == 4


def test_tools_api(make_user, django_user_model):
    mock_tool().save()
    user, token = make_user()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    listed = {t["name"]: t for t in client.get("/api/tools/").json()}
    assert {"calculator", "echo", "get_time", "fake_weather", "search_conversations"} <= set(listed)
    assert listed["fake_weather"]["kind"] == "data" and listed["calculator"]["kind"] == "code"
    assert listed["calculator"]["policy"]["side_effects"] == "read_only"

    refused = client.post("/api/tools/echo/invoke/", {"arguments": {"text": "hi"}}, format="json")
    assert refused.status_code == 403 and refused.json()["error"]["message"]

    # Staff without the admin's permission to change tools may not either:
    # the API asks what the admin's "Run with arguments" page asks.
    user.is_staff = True
    user.save()
    staff_only = client.post("/api/tools/calculator/invoke/", {"arguments": {"expression": "1"}}, format="json")
    assert staff_only.status_code == 403 and "permission to change tools" in staff_only.json()["error"]["message"]

    user.user_permissions.add(Permission.objects.get(codename="change_tooldefinition"))
    ok = client.post("/api/tools/calculator/invoke/", {"arguments": {"expression": "6*7"}}, format="json").json()
    assert ok["success"] is True and ok["result"]["result"] == 42 and ok["tool_name"] == "calculator"
    assert isinstance(ok["execution_time_ms"], int)
    bad = client.post("/api/tools/calculator/invoke/", {"arguments": '{"expression": '}, format="json").json()
    assert bad["success"] is False and bad["error"].startswith("Error: Invalid JSON in tool arguments.")
    missing = client.post("/api/tools/nope/invoke/", {"arguments": {}}, format="json")
    assert missing.status_code == 404 and "Available tools:" in missing.json()["error"]["message"]


def test_tools_turned_off_refuses_requests_naming_tools(make_user, settings, idle_broker):
    settings.CHATFORGE_TOOLS_ENABLED = False
    user, token = make_user()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    conversation_id = client.post("/api/conversations/", {}, format="json").json()["id"]
    response = client.post(f"/api/conversations/{conversation_id}/messages/", {"content": "hi", "tools": ["echo"]},
                           format="json")
    assert response.status_code == 400 and "Tools are turned off" in response.json()["error"]["message"]
    accepted = client.post(f"/api/conversations/{conversation_id}/messages/", {"content": "hi"}, format="json")
    assert accepted.status_code == 202 and Run.objects.get(pk=accepted.json()["run_id"]).options["tools"] == []


def test_the_tools_package_gets_its_settings_at_start_up(settings):
    from django.apps import apps

    from tools.executor import output_limit
    from tools.net.policy import allowed_private_hosts

    assert output_limit() == settings.CHATFORGE_TOOL_OUTPUT_MAX_CHARS
    settings.CHATFORGE_TOOL_OUTPUT_MAX_CHARS = 1234
    settings.CHATFORGE_TOOLS_ALLOWED_PRIVATE_HOSTS = ["127.0.0.1:9"]
    apps.get_app_config("catalog").ready()
    try:
        assert output_limit() == 1234
        assert allowed_private_hosts() == frozenset({"127.0.0.1:9"})
    finally:
        settings.CHATFORGE_TOOL_OUTPUT_MAX_CHARS = 20_000
        settings.CHATFORGE_TOOLS_ALLOWED_PRIVATE_HOSTS = []
        apps.get_app_config("catalog").ready()


def test_an_assistants_system_prompt_is_shown_to_staff_only(make_user, idle_broker):
    """The prompt is the operator's configuration: a user of the assistant
    sees its name in the run, staff see the prompt too."""
    Assistant.objects.create(name="secretive", system_prompt="Internal: never mention the discount code.",
                             model="demo")
    user, token = make_user()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    conversation_id = client.post("/api/conversations/", {}, format="json").json()["id"]
    run_id = client.post(f"/api/conversations/{conversation_id}/messages/",
                         {"content": "hi", "assistant": "secretive"}, format="json").json()["run_id"]

    for answer in (client.get(f"/api/runs/{run_id}/"), client.post(f"/api/runs/{run_id}/cancel/")):
        assert answer.status_code in (200, 202)
        assert answer.json()["options"]["assistant"] == "secretive"
        assert "system_prompt" not in answer.json()["options"]
        assert "discount code" not in answer.content.decode()

    user.is_staff = True
    user.save()
    shown = client.get(f"/api/runs/{run_id}/").json()["options"]
    assert shown["system_prompt"] == "Internal: never mention the discount code."
