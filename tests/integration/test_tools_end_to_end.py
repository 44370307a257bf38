"""The tool system through real workers: data-defined HTTP tools, web_fetch
of a local page, per-tool timeouts of hung handlers in a prefork worker,
and circular-call detection."""

from __future__ import annotations

import json

import pytest

from chatforge.catalog.models import ToolDefinition
from chatforge.conversations.models import Message, ToolInvocation
from tests.fakes.openai_server import Reply, always_tool
from tests.support.client import ApiClient, follow_run

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def outputs(events: list[dict]) -> dict[str, dict]:
    names = {e["data"]["id"]: e["data"]["name"] for e in events if e["type"] == "tool_call"}
    return {names[e["data"]["tool_call_id"]]: e["data"] for e in events if e["type"] == "tool_output"}


def test_admin_http_tool_and_web_fetch_reach_the_model_and_the_message(stack, fake_llm, local_site, make_user):
    ToolDefinition.objects.create(
        name="city_weather",
        description="Current weather in a city.",
        kind="http",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        url=f"{local_site.base_url}/api/weather",
        headers={"X-Api-Key": "${TOOL_WEATHER_API_KEY}"},
        params_mapping={"city": "q"},
        response_path="$.data[0]",
        max_attempts=1,
    )
    fake_llm.add_script("e2e-http-tools", [
        Reply(text="Looking.", tool_calls=[("city_weather", {"city": "Lisbon"}),
                                           ("web_fetch", {"url": f"{local_site.base_url}/page.html"})]),
        Reply(text="Lisbon is 21°C and clear; the museum opens at 9:30 on Sundays."),
    ])
    _, token = make_user()
    api = ApiClient(stack.http_url, token)
    accepted = api.post_message(api.new_conversation(), "weather and museum hours?", model="e2e-http-tools")

    events = follow_run(stack.ws_url, accepted["run_id"], token)

    assert events[-1]["type"] == "run.completed", stack.logs()
    out = outputs(events)
    assert out["city_weather"]["status"] == "success", out
    assert json.loads(out["city_weather"]["output"]) == {"city": "Lisbon", "temp_c": 21, "sky": "clear"}
    assert out["web_fetch"]["status"] == "success", out
    page = json.loads(out["web_fetch"]["output"])
    assert "opens at 9:30" in page["text"] and "not for the model" not in page["text"]
    # The model got both results on its second turn...
    second = fake_llm.requests_for("e2e-http-tools")[-1]
    tool_messages = [m["content"] for m in second["messages"] if m["role"] == "tool"]
    assert any('"temp_c":21' in c for c in tool_messages) and any("opens at 9:30" in c for c in tool_messages)
    # ...and the final message keeps them in its tool rounds.
    message = Message.objects.get(run_id=accepted["run_id"], role="assistant")
    results = {r["name"]: r for r in message.tool_rounds[0]["results"]}
    assert results["city_weather"]["status"] == "success" and "opens at 9:30" in results["web_fetch"]["output"]
    assert "test-weather-key" not in json.dumps(message.tool_rounds)


def test_hung_sync_and_async_handlers_are_cut_off_in_a_real_worker(stack, fake_llm, make_user):
    fake_llm.add_script("e2e-hang", [Reply(tool_calls=[("hang_sync", {}), ("hang_async", {})]),
                                     Reply(text="Both timed out.")])
    _, token = make_user()
    api = ApiClient(stack.http_url, token)
    accepted = api.post_message(api.new_conversation(), "hang", model="e2e-hang")

    events = follow_run(stack.ws_url, accepted["run_id"], token)

    assert events[-1]["type"] == "run.completed", stack.logs()
    out = outputs(events)
    for name in ("hang_sync", "hang_async"):
        assert out[name]["status"] == "timeout"
        assert out[name]["output"] == f"Error: Tool '{name}' timed out after 1 seconds."
    statuses = set(ToolInvocation.objects.filter(run_id=accepted["run_id"]).values_list("status", flat=True))
    assert statuses == {"timeout"}


def test_repeating_the_same_call_gets_an_error_result(stack, fake_llm, make_user):
    fake_llm.add_script("e2e-repeat", always_tool("echo", {"text": "same"}))
    _, token = make_user()
    api = ApiClient(stack.http_url, token)
    accepted = api.post_message(api.new_conversation(), "repeat", model="e2e-repeat", max_iterations=4)

    events = follow_run(stack.ws_url, accepted["run_id"], token)

    results = [e["data"] for e in events if e["type"] == "tool_output"]
    assert [r["status"] for r in results] == ["success", "success", "error", "error"]
    assert results[2]["output"].startswith("Error: 'echo' was already called 2 times with these same arguments")
