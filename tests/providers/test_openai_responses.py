"""The OpenAI Responses adapter against the fake server, over real HTTP."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from chatforge.llm.providers.base import (
    ChatMessage,
    ErrorKind,
    ProviderError,
    ReasoningDelta,
    StreamItem,
    TextDelta,
    ToolCall,
    TurnRequest,
)
from chatforge.llm.providers.openai_responses import (
    OpenAIResponsesProvider,
    _TurnState,
    input_for,
    request_params,
)
from tests.fakes.openai_server import FakeOpenAIServer, Reply, echo_user
from tests.providers.streams import collect, texts

MODEL = "fake-gpt-5"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    for name in ("get_weather", "get_time")
]
FLAT_TOOLS = [
    {
        "type": "function",
        "name": name,
        "description": f"The {name} tool.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        "strict": False,
    }
    for name in ("get_weather", "get_time")
]
# What rounds.py gives a call that never finished.
INTERRUPTED = "Error: this tool call did not finish because the run ended first."


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(api_key="sk-test") as fake:
        yield fake


@pytest.fixture(autouse=True)
def clean(server: FakeOpenAIServer) -> None:
    server.reset()


def provider(server: FakeOpenAIServer, **kwargs: object) -> OpenAIResponsesProvider:
    settings: dict = {"api_key": "sk-test", "timeout_s": 10, **kwargs}
    return OpenAIResponsesProvider(base_url=server.base_url, **settings)


def ask(
    text: str = "Hello",
    *,
    tools: list[dict] | None = None,
    options: dict | None = None,
    stream: bool = True,
) -> TurnRequest:
    return TurnRequest(
        model=MODEL,
        messages=[ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content=text)],
        tools=tools or [],
        options=options or {},
        stream=stream,
    )


def wait_for_disconnect(server: FakeOpenAIServer) -> None:
    deadline = time.monotonic() + 10
    while server.disconnects == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.disconnects == 1


# -- answers ------------------------------------------------------------------


def test_text_answer_streams_and_captures_usage(server: FakeOpenAIServer) -> None:
    answer = "The quick brown fox jumps over the lazy dog."
    usage = {
        "input_tokens": 12,
        "input_tokens_details": {"cached_tokens": 4},
        "output_tokens": 9,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 21,
    }
    server.add_script(MODEL, [Reply(text=answer, usage=usage)])

    deltas, result = collect(provider(server).stream_turn(ask()))

    assert len(texts(deltas)) > 3
    assert "".join(texts(deltas)) == answer == result.text
    assert (result.tool_calls, result.finish_reason) == ([], "stop")
    assert result.usage == {
        "prompt_tokens": 12,
        "completion_tokens": 9,
        "total_tokens": 21,
        "reasoning_tokens": 0,
        "cached_tokens": 4,
    }
    assert result.response_id and result.response_id.startswith("resp_")
    assert server.stored_conversation(result.response_id) is not None
    body = server.requests[-1]
    assert body["stream"] is True
    assert body["instructions"] == "Be brief."
    assert body["input"] == [{"role": "user", "content": "Hello"}]
    assert "tools" not in body and "previous_response_id" not in body


def test_options_map_to_responses_parameters(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="ok")])
    options = {
        "reasoning_effort": "low",
        "verbosity": "high",
        "max_tokens": 300,
        "temperature": 0.5,
        "top_k": 3,
    }

    collect(provider(server).stream_turn(ask(options=options)))

    body = server.requests[-1]
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}
    assert body["text"] == {"verbosity": "high"}
    assert (body["max_output_tokens"], body["temperature"]) == (300, 0.5)
    assert "top_k" not in body and "max_tokens" not in body and "reasoning_effort" not in body


def test_reasoning_summary_can_be_switched_off() -> None:
    params = request_params(ask(options={"reasoning_effort": "high"}), reasoning_summary=None)

    assert params["reasoning"] == {"effort": "high"}


def test_reasoning_summary_streams_as_reasoning_deltas(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="42.", reasoning="Six times seven is forty-two.")])

    deltas, result = collect(provider(server).stream_turn(ask(options={"reasoning_effort": "medium"})))

    reasoning = [item.text for item in deltas if isinstance(item, ReasoningDelta)]
    assert len(reasoning) > 1
    assert "".join(reasoning) == result.reasoning == "Six times seven is forty-two."
    assert deltas.index(next(d for d in deltas if isinstance(d, TextDelta))) > 0  # reasoning came first
    assert result.text == "42."
    assert result.usage["reasoning_tokens"] > 0
    assert result.reasoning_details and result.reasoning_details[0]["id"].startswith("rs_")
    assert "encrypted_content" not in result.reasoning_details[0]


def test_max_output_tokens_gives_finish_reason_length(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="Cut off", finish_reason="length")] * 2)

    _, streamed = collect(provider(server).stream_turn(ask()))
    _, whole = collect(provider(server).stream_turn(ask(stream=False)))

    assert (streamed.text, streamed.finish_reason) == ("Cut off", "length")
    assert (whole.text, whole.finish_reason) == ("Cut off", "length")


def test_non_streaming_answer_is_one_text_delta(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="All at once.", reasoning="Quick thought.")])

    deltas, result = collect(provider(server).stream_turn(ask(stream=False)))

    assert deltas == [ReasoningDelta("Quick thought."), TextDelta("All at once.")]
    assert (result.text, result.reasoning, result.finish_reason) == ("All at once.", "Quick thought.", "stop")
    assert result.usage["total_tokens"] > 0 and result.response_id
    assert "stream" not in server.requests[-1] or server.requests[-1]["stream"] is False


# -- tool rounds ---------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "non-streaming"])
def test_two_round_conversation_with_parallel_calls(server: FakeOpenAIServer, stream: bool) -> None:
    weather = {"city": 'Edinburgh "Old" Town', "note": "back\\slash ünïcode 🌧"}
    server.add_script(
        MODEL,
        [
            Reply(text="Let me look.", tool_calls=[("get_weather", weather), ("get_time", {})]),
            Reply(text="Rainy, and noon."),
        ],
    )
    adapter = provider(server)
    first_request = ask("Weather and time?", tools=TOOLS, stream=stream)

    first_deltas, first = collect(adapter.stream_turn(first_request))

    assert "".join(texts(first_deltas)) == first.text == "Let me look."
    assert first.finish_reason == "tool_calls"
    assert [(c.name, json.loads(c.arguments)) for c in first.tool_calls] == [
        ("get_weather", weather),
        ("get_time", {}),
    ]
    assert all(c.id.startswith("call_") for c in first.tool_calls)
    assert first.tool_calls[0].id != first.tool_calls[1].id
    assert server.requests[-1]["tools"] == FLAT_TOOLS

    outputs = ['{"sky": "rain"}', "Error: clock unavailable"]
    follow_up = TurnRequest(
        model=MODEL,
        messages=[
            *first_request.messages,
            ChatMessage(role="assistant", content=first.text, tool_calls=tuple(first.tool_calls)),
            *(
                ChatMessage(role="tool", content=output, tool_call_id=call.id, name=call.name)
                for call, output in zip(first.tool_calls, outputs)
            ),
        ],
        tools=TOOLS,
        stream=stream,
    )
    _, second = collect(adapter.stream_turn(follow_up))

    assert (second.text, second.finish_reason) == ("Rainy, and noon.", "stop")
    body = server.requests[-1]
    assert body["instructions"] == "Be brief."
    assert body["input"] == [
        {"role": "user", "content": "Weather and time?"},
        {"role": "assistant", "content": "Let me look."},
        *(
            {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
            for c in first.tool_calls
        ),
        {"type": "function_call_output", "call_id": first.tool_calls[0].id, "output": outputs[0]},
        {"type": "function_call_output", "call_id": first.tool_calls[1].id, "output": outputs[1]},
    ]
    assert "previous_response_id" not in body


def test_tool_round_with_previous_response_id_sends_only_the_outputs(server: FakeOpenAIServer) -> None:
    server.add_script(
        MODEL, [Reply(tool_calls=[("get_time", {}), ("get_weather", {"city": "Oslo"})]), Reply(text="Done.")]
    )
    adapter = provider(server)
    first_request = ask("Time and weather?", tools=TOOLS)
    _, first = collect(adapter.stream_turn(first_request))
    follow_up = TurnRequest(
        model=MODEL,
        messages=[
            *first_request.messages,
            ChatMessage(role="assistant", tool_calls=tuple(first.tool_calls)),
            *(
                ChatMessage(role="tool", content=f"out {i}", tool_call_id=c.id, name=c.name)
                for i, c in enumerate(first.tool_calls)
            ),
        ],
        tools=TOOLS,
        previous_response_id=first.response_id,
    )

    _, second = collect(adapter.stream_turn(follow_up))

    assert second.text == "Done."  # the fake found round 1 through the stored conversation
    body = server.requests[-1]
    assert body["previous_response_id"] == first.response_id
    assert body["instructions"] == "Be brief."  # not carried over by OpenAI, so resent
    assert body["input"] == [
        {"type": "function_call_output", "call_id": c.id, "output": f"out {i}"}
        for i, c in enumerate(first.tool_calls)
    ]


def test_a_conversations_second_message_sends_only_the_newest_turn(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, echo_user())
    adapter = provider(server)
    first_request = ask("My name is Ada.")
    _, first = collect(adapter.stream_turn(first_request))
    second_request = TurnRequest(
        model=MODEL,
        messages=[
            *first_request.messages,
            ChatMessage(role="assistant", content=first.text),
            ChatMessage(role="user", content="What is my name?"),
        ],
        previous_response_id=first.response_id,
    )

    _, second = collect(adapter.stream_turn(second_request))

    assert second.text == "You said: What is my name?"
    body = server.requests[-1]
    assert body["previous_response_id"] == first.response_id
    assert body["input"] == [{"role": "user", "content": "What is my name?"}]
    assert body["instructions"] == "Be brief."
    stored = server.stored_conversation(second.response_id or "")
    assert stored is not None
    assert [item.get("role") for item in stored if item.get("type", "message") == "message"] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]


def test_unknown_previous_response_is_a_bad_request(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, echo_user())
    request = TurnRequest(
        model=MODEL, messages=[ChatMessage(role="user", content="hi")], previous_response_id="resp_gone"
    )

    with pytest.raises(ProviderError) as caught:
        list(provider(server).stream_turn(request))

    assert (caught.value.kind, caught.value.retryable, caught.value.status_code) == (
        ErrorKind.BAD_REQUEST,
        False,
        400,
    )
    assert "previous_response_not_found" in caught.value.message


def test_hostile_byte_splits_assemble_exactly(server: FakeOpenAIServer) -> None:
    text = 'Grüße aus Zürich — 東京 und 🌍🌧 mit "Zitaten" und \\Backslashes\\.'
    arguments = {"city": 'São "Paulo" \\ 🌆', "nested": {"ключ": ["значение", 1.5, None]}}
    reply = Reply(text=text, tool_calls=[("get_weather", arguments)], byte_chunk_size=3, chunk_delay_s=0.0005)
    server.add_script(MODEL, [reply])

    deltas, result = collect(provider(server).stream_turn(ask(tools=TOOLS)))

    assert "".join(texts(deltas)) == result.text == text
    assert json.loads(result.tool_calls[0].arguments) == arguments
    assert server.mid_character_splits > 0


# -- errors --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "code", "kind", "retryable"),
    [
        (400, None, ErrorKind.BAD_REQUEST, False),
        (403, None, ErrorKind.PERMISSION, False),
        (422, None, ErrorKind.BAD_REQUEST, False),
        (429, None, ErrorKind.RATE_LIMIT, True),
        (429, "insufficient_quota", ErrorKind.QUOTA, False),
        (500, None, ErrorKind.SERVER, True),
        (503, "overloaded", ErrorKind.OVERLOADED, True),
        (529, None, ErrorKind.OVERLOADED, True),
        (408, None, ErrorKind.CONNECTION, True),
    ],
)
def test_http_errors_map_to_kinds(
    server: FakeOpenAIServer, status: int, code: str | None, kind: ErrorKind, retryable: bool
) -> None:
    server.add_script(MODEL, [Reply(text="no", fail_status=status, fail_code=code, fail_times=99)])

    with pytest.raises(ProviderError) as caught:
        list(provider(server).stream_turn(ask()))

    error = caught.value
    assert (error.kind, error.retryable, error.status_code) == (kind, retryable, status)
    assert error.retry_after_s == pytest.approx(0.01)  # the fake's retry-after-ms: 10
    assert f"OpenAI Responses API at {server.base_url}" in error.message
    assert len(server.requests) == 1  # the SDK did not retry


def test_rate_limit_carries_retry_after_seconds(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="later", fail_status=429, retry_after_s=None, retry_after="7")])

    with pytest.raises(ProviderError) as caught:
        list(provider(server).stream_turn(ask()))

    assert (caught.value.kind, caught.value.retry_after_s) == (ErrorKind.RATE_LIMIT, 7.0)
    assert "rate limiting" in caught.value.message
    assert len(server.requests) == 1


def test_bad_api_key(server: FakeOpenAIServer) -> None:
    with pytest.raises(ProviderError) as caught:
        list(provider(server, api_key="sk-wrong").stream_turn(ask()))

    error = caught.value
    assert (error.kind, error.retryable, error.status_code) == (ErrorKind.AUTHENTICATION, False, 401)
    assert "rejected the API key (401 invalid_api_key): Incorrect API key" in error.message
    assert "OPENAI_API_KEY" in error.message


def test_unknown_model(server: FakeOpenAIServer) -> None:
    with pytest.raises(ProviderError) as caught:
        list(provider(server).stream_turn(ask(stream=False)))

    error = caught.value
    assert (error.kind, error.retryable, error.status_code) == (ErrorKind.NOT_FOUND, False, 404)
    assert MODEL in error.message and "does not exist" in error.message
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("event", "code", "kind", "retryable"),
    [
        ("error", None, ErrorKind.SERVER, True),
        ("error", "rate_limit_exceeded", ErrorKind.RATE_LIMIT, True),
        ("response.failed", None, ErrorKind.SERVER, True),
        ("response.failed", "invalid_prompt", ErrorKind.BAD_REQUEST, False),
    ],
)
def test_error_events_mid_stream(
    server: FakeOpenAIServer, event: str, code: str | None, kind: ErrorKind, retryable: bool
) -> None:
    reply = Reply(
        text="This answer will not finish properly.",
        error_mid_stream=True,
        error_event=event,  # type: ignore[arg-type]
        fail_code=code,
        fail_message="Something broke.",
    )
    server.add_script(MODEL, [reply])
    received: list[StreamItem] = []

    with pytest.raises(ProviderError) as caught:
        for item in provider(server).stream_turn(ask()):
            received.append(item)

    assert texts(received)  # text was forwarded before the failure
    assert (caught.value.kind, caught.value.retryable) == (kind, retryable)
    assert "Something broke." in caught.value.message
    assert len(server.requests) == 1


def test_connection_dropped_mid_stream(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="This answer is cut off halfway through.", drop_mid_stream=True)])

    with pytest.raises(ProviderError) as caught:
        list(provider(server).stream_turn(ask()))

    assert (caught.value.kind, caught.value.retryable) == (ErrorKind.CONNECTION, True)


def test_malformed_event_is_a_protocol_error(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="Some text before garbage arrives.", malformed_mid_stream=True)])

    with pytest.raises(ProviderError) as caught:
        list(provider(server).stream_turn(ask()))

    assert (caught.value.kind, caught.value.retryable) == (ErrorKind.PROTOCOL, True)


def test_stall_longer_than_the_idle_timeout_is_stalled(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="A stream that stops for a while.", stall_s=1.5)])
    received: list[StreamItem] = []

    with pytest.raises(ProviderError) as caught:
        for item in provider(server, idle_timeout_s=0.3).stream_turn(ask()):
            received.append(item)

    assert texts(received)
    assert (caught.value.kind, caught.value.retryable) == (ErrorKind.STALLED, True)
    assert "stalled" in caught.value.message
    wait_for_disconnect(server)  # the adapter closed the connection


def test_short_stall_within_the_idle_timeout_is_fine(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="A stream with a short pause.", stall_s=0.2)])

    _, result = collect(provider(server, idle_timeout_s=5).stream_turn(ask()))

    assert result.text == "A stream with a short pause."


def test_unreachable_server() -> None:
    with FakeOpenAIServer() as doomed:
        base_url = doomed.base_url
    adapter = OpenAIResponsesProvider(base_url=base_url, api_key="k", connect_timeout_s=1)

    with pytest.raises(ProviderError) as caught:
        list(adapter.stream_turn(ask()))

    assert (caught.value.kind, caught.value.retryable) == (ErrorKind.CONNECTION, True)
    assert base_url in caught.value.message


def test_closing_the_generator_early_closes_the_stream(server: FakeOpenAIServer) -> None:
    long_text = " ".join(f"word{i}" for i in range(400))
    server.add_script(MODEL, [Reply(text=long_text, chunk_delay_s=0.01)])
    stream = provider(server).stream_turn(ask())

    first = next(stream)
    assert isinstance(first, TextDelta)
    stream.close()

    wait_for_disconnect(server)


# -- message conversion ----------------------------------------------------------


def test_stored_rounds_expand_into_responses_items() -> None:
    done = ToolCall(id="call_a", name="get_weather", arguments='{"city": "Rome"}')
    failed = ToolCall(id="call_b", name="get_time", arguments="")
    unfinished = ToolCall(id="call_c", name="get_weather", arguments='{"city": "Nice"}')
    messages = [
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="Rome?"),
        ChatMessage(role="assistant", content="Checking.", tool_calls=(done, failed)),
        ChatMessage(role="tool", content='{"sky": "clear"}', tool_call_id="call_a", name="get_weather"),
        ChatMessage(role="tool", content="Error: clock unavailable", tool_call_id="call_b", name="get_time"),
        ChatMessage(role="assistant", tool_calls=(unfinished,)),
        ChatMessage(role="tool", content=INTERRUPTED, tool_call_id="call_c", name="get_weather"),
        ChatMessage(role="assistant", content="Clear in Rome."),
        ChatMessage(role="user", content="Thanks"),
    ]

    instructions, items = input_for(messages)

    assert instructions == "Be brief."
    assert items == [
        {"role": "user", "content": "Rome?"},
        {"role": "assistant", "content": "Checking."},
        {
            "type": "function_call",
            "call_id": "call_a",
            "name": "get_weather",
            "arguments": '{"city": "Rome"}',
        },
        {"type": "function_call", "call_id": "call_b", "name": "get_time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_a", "output": '{"sky": "clear"}'},
        {"type": "function_call_output", "call_id": "call_b", "output": "Error: clock unavailable"},
        {
            "type": "function_call",
            "call_id": "call_c",
            "name": "get_weather",
            "arguments": '{"city": "Nice"}',
        },
        {"type": "function_call_output", "call_id": "call_c", "output": INTERRUPTED},
        {"role": "assistant", "content": "Clear in Rome."},
        {"role": "user", "content": "Thanks"},
    ]
    assert input_for(messages, continuing=True) == ("Be brief.", [{"role": "user", "content": "Thanks"}])
    assert input_for(messages[:7], continuing=True)[1] == [
        {"type": "function_call_output", "call_id": "call_c", "output": INTERRUPTED}
    ]


# -- events the fake does not produce ----------------------------------------------


def ev(type: str, **fields: object) -> SimpleNamespace:  # noqa: A002 - the event field's name
    return SimpleNamespace(type=type, **fields)


def ns(**fields: object) -> SimpleNamespace:
    return SimpleNamespace(**fields)


def test_stream_without_a_terminal_event_is_a_protocol_error() -> None:
    state = _TurnState(where="OpenAI Responses API at http://x/v1")
    items = list(state.consume(ev("response.output_text.delta", delta="half")))

    with pytest.raises(ProviderError) as caught:
        list(state.finish())

    assert items == [TextDelta("half")]
    assert (caught.value.kind, caught.value.retryable) == (ErrorKind.PROTOCOL, True)


def test_final_response_wins_and_encrypted_reasoning_is_kept() -> None:
    state = _TurnState(where="x")
    call = ns(type="function_call", id="fc_1", call_id="call_1", name="echo", arguments="")
    for event in (
        ev("response.created", response=ns(id="resp_1")),
        ev("response.output_item.added", output_index=0, item=call),
        ev("response.function_call_arguments.delta", output_index=0, item_id="fc_1", delta='{"te'),
        ev("response.function_call_arguments.delta", output_index=0, item_id="fc_1", delta='xt": "x"}'),
    ):
        list(state.consume(event))
    final = ns(
        id="resp_1",
        status="completed",
        usage=None,
        output=[
            ns(type="reasoning", id="rs_1", encrypted_content="gAAA", summary=[ns(text="Thought.")]),
            ns(type="function_call", id="fc_1", call_id="call_1", name="echo", arguments='{"text": "x"}'),
        ],
    )
    late = list(state.consume(ev("response.done", response=final)))  # a proxy's terminal event

    assert late == []
    assert list(state.finish()) == [ReasoningDelta("Thought.")]
    result = state.result()
    assert result.tool_calls == [ToolCall(id="call_1", name="echo", arguments='{"text": "x"}')]
    assert (result.finish_reason, result.response_id) == ("tool_calls", "resp_1")
    assert result.reasoning_details == [{"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA"}]


def test_streamed_calls_are_used_when_the_final_response_omits_them() -> None:
    state = _TurnState(where="x")
    for event in (
        ev(
            "response.output_item.added",
            output_index=1,
            item=ns(type="function_call", id="fc_2", call_id="call_2", name="b", arguments=""),
        ),
        ev(
            "response.output_item.added",
            output_index=0,
            item=ns(type="function_call", id="fc_1", call_id="call_1", name="a", arguments=""),
        ),
        ev("response.function_call_arguments.delta", output_index=1, item_id="fc_2", delta='{"n": 2}'),
        ev("response.function_call_arguments.delta", output_index=0, item_id="fc_1", delta='{"n": 1}'),
        ev("response.completed", response=ns(id="resp_2", status="completed", usage=None, output=[])),
    ):
        list(state.consume(event))

    result = state.result()
    assert [(c.id, c.arguments) for c in result.tool_calls] == [
        ("call_1", '{"n": 1}'),
        ("call_2", '{"n": 2}'),
    ]
