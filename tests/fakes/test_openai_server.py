"""The fake server speaks a wire format the official SDK accepts, and its
scripting rules (rounds, failures, routing) hold."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.fakes.openai_server import (
    FakeOpenAIServer,
    Reply,
    always_tool,
    echo_user,
    round_of,
    tool_then_answer,
)

MODEL = "fake-model"
TOOLS = [
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture(autouse=True)
def clean(server: FakeOpenAIServer) -> None:
    server.reset()


@pytest.fixture
def client(server: FakeOpenAIServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def test_sdk_parses_a_non_streaming_answer(server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    server.add_script(MODEL, [Reply(text="Hi ", tool_calls=[("get_time", {"timezone": "UTC"})])])

    completion = client.chat.completions.create(model=MODEL, messages=[user("time?")], tools=TOOLS)

    assert completion.object == "chat.completion"
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Hi "
    call = choice.message.tool_calls[0]
    assert (call.type, call.function.name, json.loads(call.function.arguments)) == (
        "function",
        "get_time",
        {"timezone": "UTC"},
    )
    assert completion.usage is not None and completion.usage.total_tokens > 0


def test_sdk_stream_helper_accumulates_the_stream(server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    arguments = {"timezone": 'Europe/"Paris"', "nested": {"a": [1, 2]}}
    server.add_script(MODEL, [Reply(tool_calls=[("get_time", arguments), ("get_time", {})])])

    with client.chat.completions.stream(model=MODEL, messages=[user("time?")], tools=TOOLS) as stream:
        done = [event for event in stream if event.type == "tool_calls.function.arguments.done"]
        completion = stream.get_final_completion()

    calls = completion.choices[0].message.tool_calls
    assert [json.loads(call.function.arguments) for call in calls] == [arguments, {}]
    assert [call.function.name for call in calls] == ["get_time", "get_time"]  # not doubled by the SDK
    assert len(done) == 2
    assert completion.choices[0].finish_reason == "tool_calls"


def test_raw_stream_follows_the_wire_rules(server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    reply = Reply(text="Checking the time now.", tool_calls=[("get_time", {"timezone": "UTC"})])
    server.add_script(MODEL, [reply])

    chunks = list(
        client.chat.completions.create(
            model=MODEL,
            messages=[user("time?")],
            tools=TOOLS,
            stream=True,
            stream_options={"include_usage": True},
        )
    )

    assert len({(chunk.id, chunk.created) for chunk in chunks}) == 1
    assert {chunk.object for chunk in chunks} == {"chat.completion.chunk"}
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    content = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(content) > 1 and "".join(content) == "Checking the time now."
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    fragments = [delta.tool_calls[0] for delta in deltas if delta.tool_calls]
    assert fragments[0].id and fragments[0].type == "function"
    assert (fragments[0].function.name, fragments[0].function.arguments) == ("get_time", "")
    assert all(f.id is None and f.function.name is None for f in fragments[1:])
    assert len(fragments) > 3
    assert json.loads("".join(f.function.arguments for f in fragments)) == {"timezone": "UTC"}
    assert chunks[-2].choices[0].finish_reason == "tool_calls"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None


def test_stream_opening_with_a_tool_call_has_null_content(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(tool_calls=[("get_time", {})])])

    body = {"model": MODEL, "messages": [user("t")], "stream": True}
    with httpx.stream("POST", f"{server.base_url}/chat/completions", json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]

    assert events[-1] == "[DONE]"
    first = json.loads(events[0])
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert all(json.loads(event)["choices"] for event in events[:-1])  # no usage chunk unless asked


def test_scripts_are_indexed_by_round(server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    server.add_script(MODEL, tool_then_answer("get_time", {}, "It is noon."))
    history = [user("time?")]

    first = client.chat.completions.create(model=MODEL, messages=history, tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]
    history += [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump(exclude_none=True)]},
        {"role": "tool", "tool_call_id": call.id, "content": "12:00"},
    ]
    second = client.chat.completions.create(model=MODEL, messages=history, tools=TOOLS)
    again = client.chat.completions.create(model=MODEL, messages=history, tools=TOOLS)  # stateless: a retry

    assert second.choices[0].message.content == again.choices[0].message.content == "It is noon."
    assert [round_of(body) for body in server.requests] == [0, 1, 1]
    assert len(server.requests) == 3


def test_a_new_user_message_starts_again_at_round_zero(
    server: FakeOpenAIServer, client: openai.OpenAI
) -> None:
    server.add_script(MODEL, tool_then_answer("get_time", {}, "It is noon."))
    history = [
        user("time?"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_x", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_x", "content": "12:00"},
        {"role": "assistant", "content": "It is noon."},
        user("and now?"),
    ]

    completion = client.chat.completions.create(model=MODEL, messages=history, tools=TOOLS)

    assert completion.choices[0].message.tool_calls


def test_fail_times_then_success(server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    server.add_script(MODEL, [Reply(text="finally", fail_status=503, fail_times=2)])

    for _ in range(2):
        with pytest.raises(openai.InternalServerError) as caught:
            client.chat.completions.create(model=MODEL, messages=[user("hi")])
        assert caught.value.status_code == 503
        assert caught.value.response.headers["retry-after-ms"] == "10"
    completion = client.chat.completions.create(model=MODEL, messages=[user("hi")])

    assert completion.choices[0].message.content == "finally"


def test_sdk_retries_are_visible_in_the_request_count(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="ok", fail_status=429, fail_times=2)])
    client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=2)

    completion = client.chat.completions.create(model=MODEL, messages=[user("hi")])

    assert completion.choices[0].message.content == "ok"
    assert len(server.requests) == 3


def test_unknown_model_is_a_404_with_an_openai_error_body(
    server: FakeOpenAIServer, client: openai.OpenAI
) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="nope", messages=[user("hi")])

    assert caught.value.body == {
        "message": "The model `nope` does not exist",
        "type": "invalid_request_error",
        "param": None,
        "code": "model_not_found",
    }


def test_api_key_is_checked_when_configured() -> None:
    with FakeOpenAIServer(api_key="sk-right") as fake:
        fake.add_script(MODEL, [Reply(text="ok")])
        wrong = openai.OpenAI(base_url=fake.base_url, api_key="sk-wrong", max_retries=0)
        right = openai.OpenAI(base_url=fake.base_url, api_key="sk-right", max_retries=0)

        with pytest.raises(openai.AuthenticationError):
            wrong.chat.completions.create(model=MODEL, messages=[user("hi")])
        completion = right.chat.completions.create(model=MODEL, messages=[user("hi")])
        assert completion.choices[0].message.content == "ok"


def test_unanswered_tool_call_is_rejected_like_openai(
    server: FakeOpenAIServer, client: openai.OpenAI
) -> None:
    server.add_script(MODEL, [Reply(text="ok")] * 2)
    history = [
        user("time?"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_x", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
            ],
        },
    ]

    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=MODEL, messages=history)

    assert "call_x" in caught.value.message


def test_always_tool_asks_until_tools_are_withdrawn(server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    server.add_script(MODEL, always_tool("get_time", {}))
    history: list[dict] = [user("loop")]
    for _ in range(3):
        completion = client.chat.completions.create(model=MODEL, messages=history, tools=TOOLS)
        message = completion.choices[0].message
        assert message.tool_calls
        call = message.tool_calls[0]
        history += [
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump(exclude_none=True)]},
            {"role": "tool", "tool_call_id": call.id, "content": "12:00"},
        ]

    final = client.chat.completions.create(model=MODEL, messages=history)

    assert final.choices[0].message.content == "Stopping after 3 tool results."
    assert len({body["messages"][-1].get("tool_call_id") for body in server.requests[1:]}) == 3


def test_echo_user_and_array_content(server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    server.add_script(MODEL, echo_user())

    completion = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": [{"type": "text", "text": "parts"}]}]
    )

    assert completion.choices[0].message.content == "You said: parts"


def test_models_endpoint_lists_scripted_models(server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    server.add_script("b-model", echo_user())
    server.add_script("a-model", echo_user())

    assert [model.id for model in client.models.list()] == ["a-model", "b-model"]


def test_reset_clears_scripts_and_records(server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    server.add_script(MODEL, [Reply(text="x", fail_status=500, fail_times=1)])
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model=MODEL, messages=[user("hi")])

    server.reset()

    assert server.requests == [] and server.models == []
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model=MODEL, messages=[user("hi")])


# -- knobs shared by both endpoints -------------------------------------------------


def test_retry_after_header_knob(server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    server.add_script(MODEL, [Reply(text="x", fail_status=429, retry_after_s=None, retry_after="3")])

    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model=MODEL, messages=[user("hi")])

    headers = caught.value.response.headers
    assert headers["retry-after"] == "3" and "retry-after-ms" not in headers


def test_stall_pauses_the_stream_then_finishes(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="one two three four", stall_s=0.4)])
    body = {"model": MODEL, "messages": [user("t")], "stream": True}
    arrivals: list[float] = []

    with httpx.stream("POST", f"{server.base_url}/chat/completions", json=body) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                arrivals.append(time.monotonic())
                last = line

    gaps = [later - earlier for earlier, later in zip(arrivals, arrivals[1:])]
    assert max(gaps) >= 0.35
    assert last == "data: [DONE]"


def test_byte_chunk_size_splits_inside_characters(server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    text = "Zürich 東京 🌍"
    server.add_script(MODEL, [Reply(text=text, byte_chunk_size=2)])

    chunks = list(client.chat.completions.create(model=MODEL, messages=[user("t")], stream=True))

    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text
    assert server.mid_character_splits > 0


# -- Responses API ------------------------------------------------------------------

FLAT_TOOLS = [
    {
        "type": "function",
        "name": "get_time",
        "parameters": {"type": "object", "properties": {}},
        "strict": False,
    }
]


def test_responses_stream_wire_format(server: FakeOpenAIServer) -> None:
    reply = Reply(text="Checking.", reasoning="Hmm.", tool_calls=[("get_time", {"tz": "UTC"})])
    server.add_script(MODEL, [reply])
    body = {"model": MODEL, "input": "time?", "tools": FLAT_TOOLS, "stream": True}

    with httpx.stream("POST", f"{server.base_url}/responses", json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]

    names = [line.removeprefix("event: ") for line in lines[0::2]]
    payloads = [json.loads(line.removeprefix("data: ")) for line in lines[1::2]]
    assert all(line.startswith("event: ") for line in lines[0::2])
    assert all(line.startswith("data: ") for line in lines[1::2])
    assert [p["type"] for p in payloads] == names
    assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
    assert names[:2] == ["response.created", "response.in_progress"]
    assert names[-1] == "response.completed" and "[DONE]" not in lines[-1]
    added = [p["item"] for p in payloads if p["type"] == "response.output_item.added"]
    assert [item["type"] for item in added] == ["reasoning", "message", "function_call"]
    call = added[2]
    assert call["call_id"].startswith("call_") and call["id"].startswith("fc_") and call["arguments"] == ""
    deltas = [p for p in payloads if p["type"] == "response.function_call_arguments.delta"]
    assert len(deltas) > 1 and all("call_id" not in d and d["item_id"] == call["id"] for d in deltas)
    assert json.loads("".join(d["delta"] for d in deltas)) == {"tz": "UTC"}
    final = payloads[-1]["response"]
    assert final["status"] == "completed" and final["usage"]["total_tokens"] > 0
    assert [item["type"] for item in final["output"]] == ["reasoning", "message", "function_call"]


def test_sdk_stream_helper_accepts_the_responses_stream(
    server: FakeOpenAIServer, client: openai.OpenAI
) -> None:
    calls = [("get_time", {}), ("get_time", {"tz": "CET"})]
    server.add_script(MODEL, [Reply(text="Hi there.", tool_calls=calls)])

    with client.responses.stream(model=MODEL, input="hi", tools=FLAT_TOOLS) as stream:
        final = stream.get_final_response()

    assert final.output_text == "Hi there."
    calls = [item for item in final.output if item.type == "function_call"]
    assert [json.loads(c.arguments) for c in calls] == [{}, {"tz": "CET"}]


def test_responses_conversation_continues_from_a_stored_response(
    server: FakeOpenAIServer, client: openai.OpenAI
) -> None:
    server.add_script(MODEL, tool_then_answer("get_time", {}, "It is noon."))
    first = client.responses.create(model=MODEL, input="time?", tools=FLAT_TOOLS)
    call = next(item for item in first.output if item.type == "function_call")
    outputs = [{"type": "function_call_output", "call_id": call.call_id, "output": "12:00"}]

    second = client.responses.create(
        model=MODEL, input=outputs, previous_response_id=first.id, tools=FLAT_TOOLS
    )

    assert second.output_text == "It is noon."
    stored = server.stored_conversation(second.id)
    assert stored is not None
    assert [item.get("type", "message") for item in stored] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]


def test_responses_rounds_count_tool_turns_not_calls(server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    both = Reply(tool_calls=[("get_time", {}), ("get_time", {})])
    server.add_script(MODEL, [both, Reply(text="Both done.")])
    history = [
        {"role": "user", "content": "times?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_time", "arguments": "{}"},
        {"type": "function_call", "call_id": "call_2", "name": "get_time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "12:00"},
        {"type": "function_call_output", "call_id": "call_2", "output": "13:00"},
    ]

    response = client.responses.create(model=MODEL, input=history)

    assert response.output_text == "Both done."


def test_responses_unknown_previous_response_and_unpaired_outputs(
    server: FakeOpenAIServer, client: openai.OpenAI
) -> None:
    server.add_script(MODEL, echo_user())

    with pytest.raises(openai.BadRequestError) as unknown:
        client.responses.create(model=MODEL, input="hi", previous_response_id="resp_missing")
    with pytest.raises(openai.BadRequestError) as unpaired:
        client.responses.create(
            model=MODEL, input=[{"type": "function_call_output", "call_id": "call_x", "output": "1"}]
        )

    assert unknown.value.code == "previous_response_not_found"
    assert "call_x" in unpaired.value.message


def test_responses_store_false_is_not_kept(server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    server.add_script(MODEL, echo_user())

    response = client.responses.create(model=MODEL, input="hi", store=False)

    assert response.output_text == "You said: hi"
    assert server.stored_conversation(response.id) is None


def test_responses_error_event_and_incomplete(server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    server.add_script(
        MODEL,
        lambda body: Reply(text="Words before the end.", error_mid_stream=True)
        if "fail" in body["messages"][-1]["content"]
        else Reply(text="Cut", finish_reason="length"),
    )

    failing = [event.type for event in client.responses.create(model=MODEL, input="fail", stream=True)]
    cut = client.responses.create(model=MODEL, input="cut")

    assert "response.output_text.delta" in failing and failing[-1] == "error"
    assert (cut.status, cut.incomplete_details.reason) == ("incomplete", "max_output_tokens")
