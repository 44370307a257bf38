"""Done when: an HTTP tool created through the admin is used in a run.

The tool is created by posting the admin's add form (as a person would),
then a run through the API, on the real workers, has the (fake) model call
it; the tool reaches the local test site with the run user's own secret and
its answer reaches the model, the events and the stored message.
"""

from __future__ import annotations

import json

import pytest

from chatforge.accounts.secrets import user_secret_set
from chatforge.catalog.models import ToolDefinition
from chatforge.conversations.models import Message, ToolInvocation
from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient, follow_run
from tests.support.site import API_KEY

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def create_weather_tool(admin_client, local_site) -> None:
    created = admin_client.post("/admin/catalog/tooldefinition/add/", {
        "name": "admin_weather", "description": "Current weather in a city.", "kind": "http", "enabled": "on",
        "parameters": json.dumps({"type": "object", "properties": {"city": {"type": "string"}},
                                  "required": ["city"]}),
        "mock_response": "",
        "url": f"{local_site.base_url}/api/weather", "method": "GET",
        "headers": json.dumps({"X-Api-Key": "${WEATHER_KEY}"}),
        "params_mapping": json.dumps({"city": "q"}), "response_path": "$.data[0]",
        "allowed_domains": json.dumps(["127.0.0.1"]),
        "timeout_s": "5", "max_attempts": "1", "backoff_initial_s": "0.5", "backoff_max_s": "8",
        "side_effects": "read_only",
        "pool": "process",
    })
    assert created.status_code == 302, created.context["adminform"].form.errors
    assert ToolDefinition.objects.get(name="admin_weather").headers == {"X-Api-Key": "${WEATHER_KEY}"}


def test_an_http_tool_created_in_the_admin_is_used_in_a_run(stack, fake_llm, local_site, make_user, admin_client):
    create_weather_tool(admin_client, local_site)
    user, token = make_user()
    user_secret_set(user=user, name="weather_key", value=API_KEY)
    fake_llm.add_script("admin-http-tool", [
        Reply(text="Checking.", tool_calls=[("admin_weather", {"city": "Porto"})]),
        Reply(text="Porto is 21°C and clear."),
    ])
    api = ApiClient(stack.http_url, token)
    accepted = api.post_message(api.new_conversation(), "weather in Porto?", model="admin-http-tool",
                                tools=["admin_weather"])

    events = follow_run(stack.ws_url, accepted["run_id"], token)

    assert events[-1]["type"] == "run.completed", stack.logs()
    [output] = [e["data"] for e in events if e["type"] == "tool_output"]
    assert output["status"] == "success", output
    assert json.loads(output["output"]) == {"city": "Porto", "temp_c": 21, "sky": "clear"}
    invocation = ToolInvocation.objects.get(run_id=accepted["run_id"])
    assert invocation.name == "admin_weather" and invocation.status == "success"
    # The model got the site's answer on its next turn, and the message keeps the round.
    tool_messages = [m["content"] for m in fake_llm.requests_for("admin-http-tool")[-1]["messages"]
                     if m["role"] == "tool"]
    assert any('"temp_c":21' in content for content in tool_messages)
    message = Message.objects.get(run_id=accepted["run_id"], role="assistant")
    [result] = message.tool_rounds[0]["results"]
    assert result["name"] == "admin_weather" and json.loads(result["output"])["city"] == "Porto"
    assert API_KEY not in json.dumps(message.tool_rounds)


def test_the_demo_model_calls_an_admin_made_tool_named_in_the_message(stack, local_site, make_user, admin_client):
    """No real model needed to see a new tool work: the demo model calls a
    tool the message names, with arguments taken from the message."""
    create_weather_tool(admin_client, local_site)
    user, token = make_user()
    user_secret_set(user=user, name="weather_key", value=API_KEY)
    api = ApiClient(stack.http_url, token)
    accepted = api.post_message(api.new_conversation(), "admin_weather for Porto", model="demo")

    events = follow_run(stack.ws_url, accepted["run_id"], token)

    assert events[-1]["type"] == "run.completed", stack.logs()
    [call] = [e["data"] for e in events if e["type"] == "tool_call"]
    assert (call["name"], json.loads(call["arguments"])) == ("admin_weather", {"city": "Porto"})
    answer = Message.objects.get(run_id=accepted["run_id"], role="assistant").content
    assert answer.startswith("The admin_weather tool returned: ") and '"temp_c":21' in answer.replace(" ", "")
