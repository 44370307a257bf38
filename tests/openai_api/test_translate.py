"""Request checking and chunk rendering of the OpenAI-compatible API, without
a server: what is accepted, what is refused (naming it), and that the
official SDK's stream accumulator reads our chunks correctly."""

from __future__ import annotations

import json

import pytest
from openai.lib.streaming.chat._completions import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

from chatforge.api.openai_errors import OpenAIError
from chatforge.openai_api.translate import (
    MISSING_TOOL_RESULT,
    ChunkRenderer,
    PriorMessage,
    ToolCallOut,
    ToolEventCollector,
    completion_body,
    parse_chat_request,
    sse,
)

USER = {"role": "user", "content": "What is 6*7?"}


def body(**fields):
    return {"model": "m", "messages": [USER], **fields}


def refused(payload) -> OpenAIError:
    with pytest.raises(OpenAIError) as caught:
        parse_chat_request(payload)
    assert caught.value.status == 400
    return caught.value


def test_a_plain_request():
    chat = parse_chat_request(body(stream=True, stream_options={"include_usage": True}, temperature=0.2,
                                   max_completion_tokens=100, reasoning_effort="low"))
    assert chat.model == "m" and chat.content == "What is 6*7?" and chat.prior == []
    assert chat.tools is None  # ChatForge's default tools
    assert chat.stream and chat.include_usage
    assert (chat.temperature, chat.max_tokens, chat.reasoning_effort) == (0.2, 100, "low")


def test_history_roles_and_text_parts():
    chat = parse_chat_request(body(messages=[
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]},
        {"role": "assistant", "content": "Hello."},
        {"role": "assistant", "content": None},
        {"role": "user", "content": [{"type": "text", "text": "And now?"}]},
    ]))
    assert chat.prior == [PriorMessage("system", "Be brief."), PriorMessage("user", "Hi\nthere"),
                          PriorMessage("assistant", "Hello.")]
    assert chat.content == "And now?"


def test_continuing_a_conversation_takes_only_the_last_user_message():
    chat = parse_chat_request(body(conversation_id="abc", messages=[
        {"role": "user", "content": "old"}, {"role": "assistant", "content": "old answer"},
        {"role": "user", "content": "new"}]))
    assert chat.conversation_id == "abc" and chat.prior == [] and chat.content == "new"


def test_tools_by_name_and_by_spec():
    spec = {"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}
    assert parse_chat_request(body(tools=["echo", spec, "echo"])).tools == ["echo", "calculator"]
    assert parse_chat_request(body(tools=["echo"], tool_choice="auto")).tools == ["echo"]
    assert parse_chat_request(body(tools=["echo"], tool_choice="none")).tools == []
    assert parse_chat_request(body(tool_choice="none")).tools == []


@pytest.mark.parametrize(("choice", "sent"), [
    ("required", "required"),
    ({"type": "function", "function": {"name": "echo"}}, {"type": "function", "function": {"name": "echo"}}),
])
def test_forcing_tool_choices_are_kept_for_the_provider(choice, sent):
    request = parse_chat_request(body(tools=["echo"], tool_choice=choice))
    assert request.tools == ["echo"] and request.sampling == {"tool_choice": sent}


@pytest.mark.parametrize(("payload", "says"), [
    (body(tools=["echo"], tool_choice={"type": "function", "function": {"name": "calculator"}}), "not in 'tools'"),
    (body(tools=["echo"], tool_choice={"type": "allowed_tools", "allowed_tools": {}}), "is not supported"),
])
def test_tool_choices_that_cannot_be_honoured_are_refused(payload, says):
    error = refused(payload)
    assert error.param == "tool_choice" and says in error.message


def test_sampling_parameters_are_checked_and_kept():
    schema = {"name": "answer", "schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}
    request = parse_chat_request(body(
        top_p=0.9, stop=["END", "STOP"], seed=7, presence_penalty=-0.5, frequency_penalty=1,
        response_format={"type": "json_schema", "json_schema": schema}, parallel_tool_calls=False, user="u1"))
    assert request.sampling == {
        "top_p": 0.9, "stop": ["END", "STOP"], "seed": 7, "presence_penalty": -0.5, "frequency_penalty": 1.0,
        "response_format": {"type": "json_schema", "json_schema": schema}, "parallel_tool_calls": False,
        "user": "u1"}
    assert parse_chat_request(body(response_format={"type": "json_object"})).sampling == {
        "response_format": {"type": "json_object"}}


@pytest.mark.parametrize(("field", "value"), [
    ("top_p", 1.5), ("stop", ["a", "b", "c", "d", "e"]), ("stop", ""), ("seed", 1.5), ("seed", True),
    ("presence_penalty", 3), ("response_format", {"type": "xml"}), ("parallel_tool_calls", "no"),
])
def test_bad_sampling_values_are_refused_naming_the_parameter(field, value):
    assert refused(body(**{field: value})).param == field


@pytest.mark.parametrize(("field", "value"), [
    ("n", 2), ("logprobs", True), ("top_logprobs", 3), ("functions", [{"name": "f"}]),
    ("audio", {"voice": "alloy"}), ("modalities", ["text", "audio"]), ("logit_bias", {"1": 2}),
    ("no_such_thing", 1),
])
def test_unsupported_parameters_are_named(field, value):
    error = refused(body(**{field: value}))
    assert error.param == field and error.code == "unsupported_parameter"
    assert f"'{field}'" in error.message


def test_default_values_of_unsupported_parameters_pass():
    request = parse_chat_request(body(n=1, logprobs=False, modalities=["text"], response_format={"type": "text"},
                                      user="", metadata={"a": "b"}, top_p=None))
    # Accepted and ignored: the request reads exactly as it would without them.
    assert request == parse_chat_request(body())


def test_several_unsupported_parameters_are_all_named():
    error = refused(body(n=3, logprobs=True))
    assert "'logprobs'" in error.message and "'n'" in error.message


CALC = {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "6*7"}'}}
ECHO = {"id": "c2", "type": "function", "function": {"name": "echo", "arguments": {"text": "hi"}}}


def test_tool_calls_and_tool_messages_in_history_become_the_rounds_of_the_answer_they_led_to():
    """What clients send back after a tool-using reply (LangChain, LangGraph,
    llm): kept as real tool rounds, not refused."""
    request = parse_chat_request(body(messages=[
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 6*7?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [CALC, ECHO]},
        {"role": "tool", "tool_call_id": "c2", "content": "hi"},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "42"}]},
        {"role": "assistant", "content": "It is 42."},
        {"role": "user", "content": "And doubled?"},
    ]))
    assert request.content == "And doubled?"
    assert [(m.role, m.content) for m in request.prior] == [
        ("system", "Be brief."), ("user", "What is 6*7?"), ("assistant", "It is 42.")]
    [round_] = request.prior[2].tool_rounds
    assert round_["assistant_response"] == "Let me check."
    assert round_["tool_calls"] == [
        {"id": "c1", "name": "calculator", "arguments": '{"expression": "6*7"}'},
        {"id": "c2", "name": "echo", "arguments": '{"text": "hi"}'}]
    assert [(r["tool_call_id"], r["name"], r["output"]) for r in round_["results"]] == [
        ("c2", "echo", "hi"), ("c1", "calculator", "42")]


def test_a_round_without_a_following_answer_or_results_is_kept_and_completed():
    request = parse_chat_request(body(messages=[
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [CALC]},
        {"role": "tool", "tool_call_id": "not-a-call", "content": "stray"},  # left out
        {"role": "user", "content": "so?"},
    ]))
    assert [(m.role, m.content) for m in request.prior] == [("user", "hi"), ("assistant", "")]
    [round_] = request.prior[1].tool_rounds
    assert [(r["tool_call_id"], r["status"], r["output"]) for r in round_["results"]] == [
        ("c1", "error", MISSING_TOOL_RESULT)]


def test_tool_results_after_the_last_user_message_are_the_rounds_the_answer_carries_on_from():
    chat = parse_chat_request(body(messages=[{"role": "user", "content": "hi"},
                                             {"role": "assistant", "content": "Let me see.", "tool_calls": [CALC]},
                                             {"role": "tool", "tool_call_id": "c1", "content": "42"}]))
    assert chat.content == "hi" and chat.prior == []
    assert chat.continued == [{"iteration": 0, "assistant_response": "Let me see.",
                               "tool_calls": [{"id": "c1", "name": "calculator", "arguments": '{"expression": "6*7"}'}],
                               "results": [{"tool_call_id": "c1", "name": "calculator", "output": "42",
                                            "status": "success", "execution_time_ms": 0}]}]


@pytest.mark.parametrize(("messages", "text"), [
    ([USER, {"role": "assistant", "content": None, "tool_calls": [CALC]}], "no results follow"),
    ([USER, {"role": "tool", "tool_call_id": "c9", "content": "42"}], "no assistant message"),
    ([USER, {"role": "assistant", "content": None, "tool_calls": [CALC]},
      {"role": "tool", "tool_call_id": "c9", "content": "42"}], "no assistant message"),
    ([{"role": "assistant", "content": "hello"}], "has no user message"),
])
def test_what_follows_the_last_user_message_must_be_tool_rounds(messages, text):
    error = refused(body(messages=messages))
    assert text in error.message and error.param == "messages"


@pytest.mark.parametrize(("payload", "param", "text"), [
    ({"messages": [USER]}, "model", "'model' is required"),
    (body(messages=[]), "messages", "non-empty"),
    (body(messages=[USER, {"role": "assistant", "content": "x"}]), "messages", "after the last user message only"),
    (body(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
     "messages", "an image must be"),
    (body(messages=[USER, {"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "https://x"}}]},
                    USER]), "messages", "images and files are accepted in user messages only"),
    (body(messages=[{"role": "wizard", "content": "x"}]), "messages", "unknown role"),
    (body(tools=[{"type": "custom", "custom": {"name": "x"}}]), "tools", "'custom'"),
    (body(tools=[{"name": "x"}]), "tools", "must be a tool name"),
    (body(temperature=5), "temperature", "from 0 to 2"),
    (body(max_tokens=0), "max_tokens", "positive integer"),
    (body(stream="yes"), "stream", "true or false"),
])
def test_malformed_requests_say_what_to_fix(payload, param, text):
    error = refused(payload)
    assert error.param == param and text in error.message
    assert error.body()["error"].keys() == {"message", "type", "param", "code"}
    assert error.body()["error"]["type"] == "invalid_request_error"


def renderer() -> ChunkRenderer:
    return ChunkRenderer(completion_id="chatcmpl-1", created=123, model="m", conversation_id="conv", run_id="run")


def two_round_chunks() -> list[dict]:
    r = renderer()
    return [
        r.first(),
        r.text("Let me check."),
        r.tool_calls([ToolCallOut("call_a", "calculator", '{"expression":"6*7"}'),
                      ToolCallOut("call_b", "echo", '{"text":"x"}')]),
        r.tool_output(tool_call_id="call_a", name="calculator", output='{"result":42}'),
        r.tool_output(tool_call_id="call_b", name="echo", output="x"),
        r.tool_calls([ToolCallOut("call_c", "echo", '{"text":"y"}')]),
        r.tool_output(tool_call_id="call_c", name="echo", output="y"),
        r.text(" It is 42."),
        r.finish("stop"),
        r.usage({"prompt_tokens": 10, "completion_tokens": 5}),
    ]


def test_chunks_share_id_and_carry_the_run():
    chunks = two_round_chunks()
    assert {(c["id"], c["created"], c["object"]) for c in chunks} == {("chatcmpl-1", 123, "chat.completion.chunk")}
    assert all(c["conversation_id"] == "conv" and c["run_id"] == "run" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "", "refusal": None}
    assert [e["index"] for e in chunks[2]["choices"][0]["delta"]["tool_calls"]] == [0, 1]
    assert [e["index"] for e in chunks[5]["choices"][0]["delta"]["tool_calls"]] == [2]
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 15
    assert sse(chunks[0]).startswith(b"data: {") and sse(chunks[0]).endswith(b"}\n\n")


def test_the_sdk_accumulator_keeps_every_call_of_every_round_intact():
    state = ChatCompletionStreamState()
    events = []
    for chunk in two_round_chunks():
        events.extend(state.handle_chunk(ChatCompletionChunk.model_validate(json.loads(sse(chunk)[6:]))))
    message = state.get_final_completion().choices[0].message
    assert message.content == "Let me check. It is 42."
    assert [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls] == [
        ("call_a", "calculator", '{"expression":"6*7"}'), ("call_b", "echo", '{"text":"x"}'),
        ("call_c", "echo", '{"text":"y"}')]
    done = [e for e in events if e.type == "tool_calls.function.arguments.done"]
    assert [(e.index, e.name) for e in done] == [(0, "calculator"), (1, "echo"), (2, "echo")]


def test_unknown_finish_reasons_read_as_stop():
    assert renderer().finish("max_iterations")["choices"][0]["finish_reason"] == "stop"
    assert renderer().finish("tool_calls")["choices"][0]["finish_reason"] == "tool_calls"
    assert renderer().finish("length")["choices"][0]["finish_reason"] == "length"


def event(type_, **data):
    return {"type": type_, "data": data}


def test_tool_events_in_order_with_retried_text_dropped():
    collector = ToolEventCollector()
    collector.on_event(event("llm.started", iteration=0))
    collector.on_event(event("content.delta", text="Let me "))
    collector.on_event(event("llm.retry", iteration=0, attempt=1, error="503", retry_in_s=0.1, discard_text=True))
    collector.on_event(event("content.delta", text="Let me check."))
    collector.on_tool_calls([ToolCallOut("call_a", "echo", '{"text":"x"}')])
    collector.on_event(event("tool_output", tool_call_id="call_a", name="echo", output="x", status="success"))
    collector.on_event(event("llm.started", iteration=1))
    collector.on_event(event("content.delta", text="half"))
    collector.on_event(event("llm.started", iteration=1))  # the turn's worker died; it runs again
    collector.on_event(event("content.delta", text="Done."))
    assert collector.finish() == [
        {"type": "text", "value": "Let me check."},
        {"type": "tool_call", "value": {"id": "call_a", "type": "function",
                                        "function": {"name": "echo", "arguments": '{"text":"x"}'}}},
        {"type": "tool_output", "value": {"tool_call_id": "call_a", "name": "echo", "output": "x"}},
        {"type": "text", "value": "Done."},
    ]


def test_completion_body_has_no_client_tool_calls():
    completion = completion_body(completion_id="chatcmpl-1", created=1, model="m", content="42", finish="stop",
                                 usage={"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
                                 tool_events=[], conversation_id="c", run_id="r")
    assert completion["object"] == "chat.completion"
    assert completion["choices"][0]["message"] == {"role": "assistant", "content": "42", "refusal": None}
    assert completion["usage"] == {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}


def test_image_parts_of_user_messages_are_kept_with_their_text():
    png = "data:image/png;base64,iVBORw0KGgo="
    chat = parse_chat_request(body(messages=[
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": png}}]},
        {"role": "assistant", "content": "A pixel."},
        {"role": "user", "content": [{"type": "text", "text": "And this?"},
                                     {"type": "image_url", "image_url": {"url": "https://example.com/b.jpg"}}]},
    ]))
    assert chat.prior[0].images == (png,) and chat.prior[0].content == ""
    assert chat.content == "And this?" and chat.images == ["https://example.com/b.jpg"]
