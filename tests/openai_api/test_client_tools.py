"""Tools the client runs itself, through ``/v1/chat/completions`` with the
official OpenAI SDK against the live stack: the model's call of a client
tool ends the response with ``finish_reason: "tool_calls"`` and standard
``tool_calls``; the client's ``tool`` messages in its next request carry the
answer on — streamed and not, mixed with server tools in one round (the
server's run first, once), and with the server's calls of the round, which
the client never saw, restored from the ledger for the model."""

from __future__ import annotations

import json

import openai
import pytest

from chatforge.conversations.models import Message, Run, ToolInvocation
from tests.fakes.openai_server import Reply, tool_results

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city, from the client's own service.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def sdk(stack, token: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.http_url + "/v1", api_key=token, max_retries=0, timeout=60)


def weather_script(*, with_calculator: bool = False):
    """Asks for the weather (and 6*7 when told to) the first time; answers
    from the results once the client's result is in the conversation."""

    def script(body):
        results = tool_results(body)
        weather = [r for r in results if r["content"].startswith("Sunny")]
        if not weather:
            calls = [("get_weather", {"city": "Paris"})]
            if with_calculator:
                calls.insert(0, ("calculator", {"expression": "6*7"}))
            return Reply(text="Let me look.", tool_calls=calls)
        return Reply(text=f"In Paris: {weather[-1]['content']}. Tools answered: {len(results)}.")

    return script


def accumulate(stream) -> tuple[str, list[dict], str]:
    """What a streaming client gathers: text, tool calls by index, finish reason."""
    text, calls, finish = "", {}, ""
    for chunk in stream:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        text += choice.delta.content or ""
        for part in choice.delta.tool_calls or []:
            call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
            call["id"] += part.id or ""
            call["name"] += part.function.name or ""
            call["arguments"] += part.function.arguments or ""
        finish = choice.finish_reason or finish
    return text, [calls[i] for i in sorted(calls)], finish


def as_openai(calls: list[dict]) -> list[dict]:
    return [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls]


@pytest.mark.parametrize("stream", [False, True])
def test_a_client_tool_round_trip(stack, fake_llm, make_user, stream):
    model = f"client-tool-{'stream' if stream else 'plain'}"
    fake_llm.add_script(model, weather_script())
    user, token = make_user()
    client = sdk(stack, token)
    messages = [{"role": "user", "content": "Weather in Paris?"}]

    if stream:
        text, calls, finish = accumulate(client.chat.completions.create(
            model=model, messages=messages, tools=[WEATHER], stream=True))
    else:
        first = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER])
        message = first.choices[0].message
        text, finish = message.content, first.choices[0].finish_reason
        calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in message.tool_calls]
    assert finish == "tool_calls" and text == "Let me look."
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [("get_weather", {"city": "Paris"})]
    first_run = Run.objects.get(user=user)
    assert (first_run.status, first_run.finish_reason) == ("completed", "tool_calls")
    assert ToolInvocation.objects.get(run=first_run).status == "client"  # never run on the server

    messages += [{"role": "assistant", "content": text, "tool_calls": as_openai(calls)},
                 {"role": "tool", "tool_call_id": calls[0]["id"], "content": "Sunny, 21 °C"}]
    if stream:
        text, calls, finish = accumulate(client.chat.completions.create(
            model=model, messages=messages, tools=[WEATHER], stream=True))
    else:
        second = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER])
        text, finish, calls = second.choices[0].message.content, second.choices[0].finish_reason, \
            second.choices[0].message.tool_calls or []
    assert (text, finish, calls) == ("In Paris: Sunny, 21 °C. Tools answered: 1.", "stop", [])
    seen = fake_llm.requests_for(model)[-1]["messages"]
    assert [m["role"] for m in seen] == ["user", "assistant", "tool"]
    assert seen[1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert seen[2]["content"] == "Sunny, 21 °C"
    # The answer is stored with the client's round, as a server round would be.
    answer = Message.objects.get(run__user=user, role="assistant", finish_reason="stop")
    assert answer.tool_rounds[0]["results"][0]["output"] == "Sunny, 21 °C"


def test_server_and_client_tools_in_one_round(stack, fake_llm, make_user):
    """The server's calculator runs first (once); the response asks the
    client only for its own tool; the next request, whose history shows
    only the client's call, reaches the model with the server's call and
    result too (found by the client call's id)."""
    fake_llm.add_script("client-mixed", weather_script(with_calculator=True))
    user, token = make_user()
    client = sdk(stack, token)
    messages = [{"role": "user", "content": "Weather in Paris, and 6*7?"}]
    tools = ["calculator", WEATHER]

    text, calls, finish = accumulate(client.chat.completions.create(
        model="client-mixed", messages=messages, tools=tools, stream=True))
    assert finish == "tool_calls" and [c["name"] for c in calls] == ["get_weather"]
    messages += [{"role": "assistant", "content": text, "tool_calls": as_openai(calls)},
                 {"role": "tool", "tool_call_id": calls[0]["id"], "content": "Sunny, 21 °C"}]
    final = client.chat.completions.create(model="client-mixed", messages=messages, tools=tools)
    assert final.choices[0].message.content == "In Paris: Sunny, 21 °C. Tools answered: 2."

    seen = fake_llm.requests_for("client-mixed")[-1]["messages"]
    assert [m["role"] for m in seen] == ["user", "assistant", "tool", "tool"]
    assert [c["function"]["name"] for c in seen[1]["tool_calls"]] == ["calculator", "get_weather"]
    assert json.loads(seen[2]["content"])["result"] == 42 and seen[3]["content"] == "Sunny, 21 °C"
    ran = ToolInvocation.objects.filter(run__user=user).values_list("name", "status")
    assert sorted(ran) == [("calculator", "success"), ("get_weather", "client")]


def test_client_history_that_is_not_in_the_ledger_is_replayed_as_sent(stack, fake_llm, make_user):
    fake_llm.add_script("client-replay", weather_script())
    _, token = make_user()
    call = {"id": "call_made_up", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    final = sdk(stack, token).chat.completions.create(model="client-replay", tools=[WEATHER], messages=[
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_made_up", "content": "Sunny, 30 °C"},
    ])
    assert final.choices[0].message.content == "In Paris: Sunny, 30 °C. Tools answered: 1."
    seen = fake_llm.requests_for("client-replay")[-1]["messages"]
    assert seen[1]["tool_calls"][0]["id"] == "call_made_up"


@pytest.mark.parametrize(("request_options", "code", "text"), [
    ({"tools": ["echo", {"type": "function", "function": {
        "name": "calculator", "description": "mine",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}}]},
     "tool_name_conflict", "has the name of a server tool"),
    ({"tools": [{"type": "function", "function": {"name": "get weather!", "parameters": {"type": "object"}}}]},
     None, "must be 1 to 64 letters"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "objekt"}}}]},
     None, "not a valid JSON Schema"),
    ({"messages": [{"role": "user", "content": "hi"},
                   {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                         "function": {"name": "f", "arguments": "{}"}}]}]},
     None, "no results follow"),
    ({"messages": [{"role": "user", "content": "hi"},
                   {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                         "function": {"name": "f", "arguments": "{}"}}]},
                   {"role": "tool", "tool_call_id": "c1", "content": "x"}],
      "conversation_id": "00000000-0000-0000-0000-000000000000"}, None, "without 'conversation_id'"),
    ({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
     None, "after the last user message only"),
])
def test_client_tool_requests_that_cannot_be_honoured(stack, make_user, request_options, code, text):
    user, token = make_user()
    body = {"model": "demo", "messages": [{"role": "user", "content": "hi"}], **request_options}
    extra = {"conversation_id": body.pop("conversation_id")} if "conversation_id" in body else None
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(stack, token).chat.completions.create(**body, extra_body=extra)
    error = caught.value.body
    assert text in error["message"] and (code is None or error["code"] == code), error
    assert not Run.objects.filter(user=user).exists()


def test_a_frontend_sending_only_its_own_tools_still_gets_the_servers(stack, fake_llm, make_user):
    """Shaped like Open WebUI's default chat request: many specs of its own
    tools, no server tool named. The model is offered the server's tools
    beside them, and its call of the server's calculator runs on the server."""
    frontend_tools = [{"type": "function", "function": {
        "name": f"frontend_tool_{i}", "description": "One of the frontend's own tools.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}} for i in range(36)]

    def script(body):
        offered = {tool["function"]["name"] for tool in body.get("tools", [])}
        if "calculator" not in offered:
            return Reply(text="I have no calculator.")
        results = tool_results(body)
        if not results:
            return Reply(text="", tool_calls=[("calculator", {"expression": "17*23"})])
        return Reply(text=f"17*23 = {json.loads(results[-1]['content'])['result']}.")

    fake_llm.add_script("frontend-tools", script)
    user, token = make_user()
    answer = sdk(stack, token).chat.completions.create(
        model="frontend-tools", tools=frontend_tools, messages=[{"role": "user", "content": "What is 17*23?"}])
    assert (answer.choices[0].message.content, answer.choices[0].finish_reason) == ("17*23 = 391.", "stop")
    offered = [tool["function"]["name"] for tool in fake_llm.requests_for("frontend-tools")[0]["tools"]]
    assert "calculator" in offered and "frontend_tool_35" in offered
    assert list(ToolInvocation.objects.filter(run__user=user).values_list("name", "status")) == \
        [("calculator", "success")]
