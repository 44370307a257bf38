"""The OpenAI-compatible adapter against the fake server, over real HTTP."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from openai.types.chat import ChatCompletionChunk

from chatforge.llm.providers.base import (
    ChatMessage,
    ErrorKind,
    ProviderError,
    ReasoningDelta,
    StreamItem,
    TextDelta,
    ToolCall,
    TurnRequest,
    TurnResult,
)
from chatforge.llm.providers.openai_compat import OpenAICompatibleProvider, _TurnState
from tests.fakes.openai_server import FakeOpenAIServer, Reply, text_reply
from tests.providers.streams import collect, texts

MODEL = "fake-gpt"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {"type": "object", "properties": {}},
        },
    }
    for name in ("get_weather", "get_time")
]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(api_key="sk-test") as fake:
        yield fake


@pytest.fixture(autouse=True)
def clean(server: FakeOpenAIServer) -> None:
    server.reset()


def provider(
    server: FakeOpenAIServer, *, max_retries: int = 0, api_key: str = "sk-test"
) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(
        base_url=server.base_url, api_key=api_key, max_retries=max_retries, timeout_s=10
    )


def ask(
    text: str = "Hello", *, tools: list[dict] | None = None, options: dict | None = None, stream: bool = True
) -> TurnRequest:
    return TurnRequest(
        model=MODEL,
        messages=[ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content=text)],
        tools=tools or [],
        options=options or {},
        stream=stream,
    )


def test_text_answer_streams_and_captures_usage(server: FakeOpenAIServer) -> None:
    answer = "The quick brown fox jumps over the lazy dog."
    usage = {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21}
    server.add_script(MODEL, [Reply(text=answer, usage=usage)])

    deltas, result = collect(provider(server).stream_turn(ask(options={"temperature": 0.2, "top_k": 3})))

    assert len(texts(deltas)) > 3
    assert "".join(texts(deltas)) == answer == result.text
    assert result.tool_calls == []
    assert result.finish_reason == "stop"
    assert result.usage == usage
    assert result.response_id and result.response_id.startswith("chatcmpl-")
    body = server.requests[-1]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.2
    assert "top_k" not in body and "tools" not in body and "tool_choice" not in body


def test_reasoning_deltas_and_reasoning_tokens(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="42.", reasoning="Six times seven is forty-two.")])

    deltas, result = collect(provider(server).stream_turn(ask()))

    reasoning = [item.text for item in deltas if isinstance(item, ReasoningDelta)]
    assert "".join(reasoning) == result.reasoning == "Six times seven is forty-two."
    assert result.text == "42."
    assert result.usage["reasoning_tokens"] > 0


def test_two_parallel_tool_calls_are_assembled_exactly(server: FakeOpenAIServer) -> None:
    weather = {"city": 'Edinburgh "Old" Town', "units": "c", "note": "back\\slash"}
    server.add_script(MODEL, [Reply(tool_calls=[("get_weather", weather), ("get_time", {})])])

    deltas, result = collect(provider(server).stream_turn(ask("Weather and time?", tools=TOOLS)))

    assert texts(deltas) == []
    assert result.finish_reason == "tool_calls"
    assert [(call.name, json.loads(call.arguments)) for call in result.tool_calls] == [
        ("get_weather", weather),
        ("get_time", {}),
    ]
    assert all(call.id.startswith("call_") for call in result.tool_calls)
    assert result.tool_calls[0].id != result.tool_calls[1].id
    body = server.requests[-1]
    assert body["tools"] == TOOLS
    assert "tool_choice" not in body


def test_tool_calls_after_preamble_text(server: FakeOpenAIServer) -> None:
    reply = Reply(text="Let me check that.", tool_calls=[("get_time", {"timezone": "UTC"})])
    server.add_script(MODEL, [reply])

    deltas, result = collect(provider(server).stream_turn(ask("Time?", tools=TOOLS)))

    assert "".join(texts(deltas)) == result.text == "Let me check that."
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("get_time", '{"timezone": "UTC"}')]
    assert result.finish_reason == "tool_calls"


def test_ollama_style_parallel_calls_all_at_index_zero(server: FakeOpenAIServer) -> None:
    calls = [("get_time", {"timezone": "UTC"}), ("get_time", {"timezone": "Asia/Tokyo"})]
    server.add_script(MODEL, [Reply(tool_calls=calls, finish_reason="stop", tool_call_style="ollama")])

    _, result = collect(provider(server).stream_turn(ask("Times?", tools=TOOLS)))

    assert [json.loads(c.arguments)["timezone"] for c in result.tool_calls] == ["UTC", "Asia/Tokyo"]
    assert result.finish_reason == "tool_calls"  # detected by presence, not finish_reason


def test_second_round_sends_tool_calls_and_results_in_openai_format(server: FakeOpenAIServer) -> None:
    server.add_script(
        MODEL,
        [
            Reply(tool_calls=[("get_weather", {"city": "Paris"}), ("get_time", {})]),
            Reply(text="Sunny, and noon."),
        ],
    )
    adapter = provider(server)
    first_request = ask("Weather and time in Paris?", tools=TOOLS)
    _, first = collect(adapter.stream_turn(first_request))
    outputs = ['{"sky": "sunny"}', "Error: clock unavailable"]
    follow_up = TurnRequest(
        model=MODEL,
        messages=[
            *first_request.messages,
            ChatMessage(role="assistant", content=None, tool_calls=tuple(first.tool_calls)),
            *(
                ChatMessage(role="tool", content=output, tool_call_id=call.id, name=call.name)
                for call, output in zip(first.tool_calls, outputs)
            ),
        ],
        tools=TOOLS,
    )

    _, second = collect(adapter.stream_turn(follow_up))

    assert second.text == "Sunny, and noon."
    sent = server.requests[-1]["messages"]
    assert sent[2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in first.tool_calls
        ],
    }
    assert sent[3:] == [
        {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": outputs[0]},
        {"role": "tool", "tool_call_id": first.tool_calls[1].id, "content": outputs[1]},
    ]


def test_server_error_is_retried_by_the_sdk(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="Recovered.", fail_status=500, fail_times=1)])

    _, result = collect(provider(server, max_retries=2).stream_turn(ask()))

    assert result.text == "Recovered."
    assert len(server.requests) == 2


def test_server_error_after_retries_is_retryable(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="never", fail_status=503, fail_times=99)])

    with pytest.raises(ProviderError) as caught:
        list(provider(server, max_retries=1).stream_turn(ask()))

    assert caught.value.retryable is True
    assert caught.value.status_code == 503
    assert len(server.requests) == 2


def test_bad_api_key_is_not_retryable(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="unreachable")])

    with pytest.raises(ProviderError) as caught:
        list(provider(server, api_key="sk-wrong").stream_turn(ask()))

    error = caught.value
    assert error.retryable is False
    assert error.status_code == 401
    assert f"provider at {server.base_url} rejected the API key (401" in error.message
    assert "Incorrect API key" in error.message


def test_unknown_model_is_not_retryable(server: FakeOpenAIServer) -> None:
    with pytest.raises(ProviderError) as caught:
        list(provider(server).stream_turn(ask()))

    error = caught.value
    assert (error.retryable, error.status_code) == (False, 404)
    assert MODEL in error.message and "does not exist" in error.message


def test_rate_limit_is_retryable(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="later", fail_status=429, fail_times=1)])

    with pytest.raises(ProviderError) as caught:
        list(provider(server).stream_turn(ask()))

    assert (caught.value.retryable, caught.value.status_code) == (True, 429)
    assert "rate limit" in caught.value.message


def test_insufficient_quota_is_not_retryable(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="no", fail_status=429, fail_code="insufficient_quota")])

    with pytest.raises(ProviderError) as caught:
        list(provider(server).stream_turn(ask()))

    assert (caught.value.retryable, caught.value.status_code) == (False, 429)
    assert "quota" in caught.value.message


def test_bad_request_is_not_retryable(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="no", fail_status=400, fail_message="Invalid 'messages'.")])

    with pytest.raises(ProviderError) as caught:
        list(provider(server).stream_turn(ask()))

    assert (caught.value.retryable, caught.value.status_code) == (False, 400)
    assert "Invalid 'messages'." in caught.value.message


def test_error_mid_stream_raises_provider_error(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="This answer will not finish properly.", error_mid_stream=True)])
    received: list[StreamItem] = []

    with pytest.raises(ProviderError) as caught:
        for item in provider(server).stream_turn(ask()):
            received.append(item)

    assert texts(received)  # some text was forwarded before the failure
    assert caught.value.retryable is True
    assert "mid-stream" in caught.value.message


def test_connection_dropped_mid_stream_is_retryable(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="This answer is cut off halfway through.", drop_mid_stream=True)])

    with pytest.raises(ProviderError) as caught:
        list(provider(server).stream_turn(ask()))

    assert caught.value.retryable is True


def test_unreachable_server_is_retryable() -> None:
    with FakeOpenAIServer() as doomed:
        base_url = doomed.base_url
    adapter = OpenAICompatibleProvider(base_url=base_url, api_key="k", max_retries=0, connect_timeout_s=1)

    with pytest.raises(ProviderError) as caught:
        list(adapter.stream_turn(ask()))

    assert caught.value.retryable is True
    assert base_url in caught.value.message


def test_closing_the_generator_early_closes_the_stream(server: FakeOpenAIServer) -> None:
    long_text = " ".join(f"word{i}" for i in range(400))
    server.add_script(MODEL, [Reply(text=long_text, chunk_delay_s=0.01)])
    stream = provider(server).stream_turn(ask())

    first = next(stream)
    assert isinstance(first, TextDelta)
    stream.close()

    deadline = time.monotonic() + 5
    while server.disconnects == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.disconnects == 1


def test_empty_assistant_history_and_missing_tool_arguments_are_sent_valid(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, text_reply("ok"))
    call = ToolCall(id="call_1", name="get_time", arguments="")
    request = TurnRequest(
        model=MODEL,
        messages=[
            ChatMessage(role="user", content="first"),
            ChatMessage(role="assistant", content="answer"),
            ChatMessage(role="user", content="second"),
            ChatMessage(role="assistant", tool_calls=(call,)),
            ChatMessage(role="tool", content="12:00", tool_call_id="call_1", name="get_time"),
        ],
    )

    collect(provider(server).stream_turn(request))

    sent = server.requests[-1]["messages"]
    assert sent[1] == {"role": "assistant", "content": "answer"}
    assert sent[3]["tool_calls"][0]["function"]["arguments"] == "{}"


# -- chunk handling that the fake server does not produce -------------------


def chunk(choices: list[dict], **extra: object) -> ChatCompletionChunk:
    """Built the way the SDK builds parsed chunks: without validation, so
    off-spec values (Azure's ``object: ""``) survive as they would on the wire."""
    fields = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    return ChatCompletionChunk.construct(**{**fields, "choices": choices, **extra})


def choice(delta: dict, finish_reason: str | None = None) -> dict:
    return {"index": 0, "delta": delta, "finish_reason": finish_reason}


def replay(*chunks: ChatCompletionChunk) -> tuple[list[StreamItem], TurnResult]:
    state = _TurnState()
    items = [item for c in chunks for item in state.consume(c)]
    return items, state.result(where="http://x/v1")


def test_filter_events_and_usage_only_chunks_are_handled() -> None:
    items, result = replay(
        chunk([], object="", prompt_filter_results=[{"prompt_index": 0}]),  # Azure: skipped
        chunk([choice({"role": "assistant", "reasoning_content": "hmm", "content": "Hi"})]),
        chunk([choice({"refusal": " but no."}, finish_reason="stop")]),
        chunk([], usage={"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}),
    )

    assert items == [ReasoningDelta("hmm"), TextDelta("Hi"), TextDelta(" but no.")]
    assert (result.text, result.reasoning, result.finish_reason) == ("Hi but no.", "hmm", "stop")
    assert result.usage == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    assert result.response_id == "chatcmpl-1"


def test_last_fragment_in_the_finishing_chunk_and_stop_with_calls() -> None:
    head = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "echo", "arguments": '{"te'}}
    tail = {"index": 0, "function": {"arguments": 'xt": "x"}'}}
    _, result = replay(
        chunk([choice({"role": "assistant", "content": None, "tool_calls": [head]})]),
        chunk([choice({"tool_calls": [tail]}, finish_reason="stop")]),
    )

    assert result.tool_calls == [ToolCall(id="call_1", name="echo", arguments='{"text": "x"}')]
    assert result.finish_reason == "tool_calls"


def test_length_without_calls_is_kept() -> None:
    _, result = replay(chunk([choice({"content": "trunc"}, finish_reason="length")]))

    assert result.finish_reason == "length"


def test_stream_without_finish_reason_is_an_incomplete_turn() -> None:
    state = _TurnState()
    list(state.consume(chunk([choice({"content": "half"})])))

    with pytest.raises(ProviderError) as caught:
        state.result(where="http://x/v1")

    assert caught.value.retryable is True


# -- error kinds, timeouts and non-streaming (the standard adapter interface) ------


def test_sdk_retries_are_off_by_default(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="never", fail_status=503, fail_times=99)])
    adapter = OpenAICompatibleProvider(base_url=server.base_url, api_key="sk-test")

    with pytest.raises(ProviderError) as caught:
        list(adapter.stream_turn(ask()))

    assert (caught.value.kind, caught.value.retryable) == (ErrorKind.SERVER, True)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("status", "code", "kind", "retryable"),
    [
        (400, None, ErrorKind.BAD_REQUEST, False),
        (403, None, ErrorKind.PERMISSION, False),
        (404, None, ErrorKind.NOT_FOUND, False),
        (422, None, ErrorKind.BAD_REQUEST, False),
        (429, None, ErrorKind.RATE_LIMIT, True),
        (429, "insufficient_quota", ErrorKind.QUOTA, False),
        (500, None, ErrorKind.SERVER, True),
        (503, "overloaded", ErrorKind.OVERLOADED, True),
        (529, None, ErrorKind.OVERLOADED, True),
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
    assert len(server.requests) == 1


def test_bad_api_key_kind_and_hint(server: FakeOpenAIServer) -> None:
    with pytest.raises(ProviderError) as caught:
        list(provider(server, api_key="sk-wrong").stream_turn(ask()))

    assert caught.value.kind == ErrorKind.AUTHENTICATION
    assert "OPENAI_API_KEY" in caught.value.message
    assert len(server.requests) == 1


def test_retry_after_header_in_seconds(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="later", fail_status=429, retry_after_s=None, retry_after="2.5")])

    with pytest.raises(ProviderError) as caught:
        list(provider(server).stream_turn(ask(stream=False)))

    assert (caught.value.kind, caught.value.retry_after_s) == (ErrorKind.RATE_LIMIT, 2.5)


@pytest.mark.parametrize(
    ("code", "kind", "retryable"),
    [(None, ErrorKind.SERVER, True), ("context_length_exceeded", ErrorKind.BAD_REQUEST, False)],
)
def test_error_event_mid_stream_kinds(
    server: FakeOpenAIServer, code: str | None, kind: ErrorKind, retryable: bool
) -> None:
    server.add_script(MODEL, [Reply(text="Some words first.", error_mid_stream=True, fail_code=code)])

    with pytest.raises(ProviderError) as caught:
        list(provider(server).stream_turn(ask()))

    assert (caught.value.kind, caught.value.retryable) == (kind, retryable)


def test_dropped_connection_is_a_connection_error(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="This answer is cut off halfway through.", drop_mid_stream=True)])

    with pytest.raises(ProviderError) as caught:
        list(provider(server).stream_turn(ask()))

    assert caught.value.kind == ErrorKind.CONNECTION


def test_malformed_chunk_is_a_protocol_error(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="Some words before garbage.", malformed_mid_stream=True)])

    with pytest.raises(ProviderError) as caught:
        list(provider(server).stream_turn(ask()))

    assert (caught.value.kind, caught.value.retryable) == (ErrorKind.PROTOCOL, True)


def test_unreachable_server_is_a_connection_error() -> None:
    with FakeOpenAIServer() as doomed:
        base_url = doomed.base_url
    adapter = OpenAICompatibleProvider(base_url=base_url, api_key="k", connect_timeout_s=1)

    with pytest.raises(ProviderError) as caught:
        list(adapter.stream_turn(ask()))

    assert caught.value.kind == ErrorKind.CONNECTION


def test_stall_longer_than_the_idle_timeout_is_stalled(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="A stream that stops for a while.", stall_s=1.5)])
    adapter = OpenAICompatibleProvider(base_url=server.base_url, api_key="sk-test", idle_timeout_s=0.3)
    received: list[StreamItem] = []

    with pytest.raises(ProviderError) as caught:
        for item in adapter.stream_turn(ask()):
            received.append(item)

    assert texts(received)
    assert (caught.value.kind, caught.value.retryable) == (ErrorKind.STALLED, True)
    deadline = time.monotonic() + 10
    while server.disconnects == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.disconnects == 1


def test_short_stall_within_the_idle_timeout_is_fine(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, [Reply(text="A stream with a short pause.", stall_s=0.2)])
    adapter = OpenAICompatibleProvider(base_url=server.base_url, api_key="sk-test", idle_timeout_s=5)

    _, result = collect(adapter.stream_turn(ask()))

    assert result.text == "A stream with a short pause."


def test_non_streaming_two_round_conversation(server: FakeOpenAIServer) -> None:
    server.add_script(
        MODEL,
        [
            Reply(
                text="Looking.",
                reasoning="Two tools.",
                tool_calls=[("get_weather", {"city": "Oslo"}), ("get_time", {})],
            ),
            Reply(text="Snow, and noon."),
        ],
    )
    adapter = provider(server)
    first_request = ask("Weather and time in Oslo?", tools=TOOLS, stream=False)

    deltas, first = collect(adapter.stream_turn(first_request))

    assert deltas == [ReasoningDelta("Two tools."), TextDelta("Looking.")]
    assert first.finish_reason == "tool_calls"
    assert [(c.name, json.loads(c.arguments)) for c in first.tool_calls] == [
        ("get_weather", {"city": "Oslo"}),
        ("get_time", {}),
    ]
    assert first.usage["total_tokens"] > 0 and first.response_id
    assert server.requests[-1]["stream"] is False and "stream_options" not in server.requests[-1]
    follow_up = TurnRequest(
        model=MODEL,
        messages=[
            *first_request.messages,
            ChatMessage(role="assistant", content=first.text, tool_calls=tuple(first.tool_calls)),
            *(
                ChatMessage(role="tool", content=f"out {i}", tool_call_id=c.id, name=c.name)
                for i, c in enumerate(first.tool_calls)
            ),
        ],
        tools=TOOLS,
        stream=False,
    )

    deltas, second = collect(adapter.stream_turn(follow_up))

    assert deltas == [TextDelta("Snow, and noon.")]
    assert (second.text, second.finish_reason) == ("Snow, and noon.", "stop")
    sent = server.requests[-1]["messages"]
    assert sent[2:] == [
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in first.tool_calls
            ],
        },
        {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "out 0"},
        {"role": "tool", "tool_call_id": first.tool_calls[1].id, "content": "out 1"},
    ]


def test_hostile_byte_splits_assemble_exactly(server: FakeOpenAIServer) -> None:
    text = 'Grüße aus Zürich — 東京 und 🌍🌧 mit "Zitaten" und \\Backslashes\\.'
    arguments = {"city": 'São "Paulo" \\ 🌆', "nested": {"ключ": ["значение", 1.5, None]}}
    reply = Reply(text=text, tool_calls=[("get_weather", arguments)], byte_chunk_size=3, chunk_delay_s=0.0005)
    server.add_script(MODEL, [reply])

    deltas, result = collect(provider(server).stream_turn(ask(tools=TOOLS)))

    assert "".join(texts(deltas)) == result.text == text
    assert json.loads(result.tool_calls[0].arguments) == arguments
    assert server.mid_character_splits > 0


def test_verbosity_passes_through(server: FakeOpenAIServer) -> None:
    server.add_script(MODEL, text_reply("ok"))

    collect(provider(server).stream_turn(ask(options={"verbosity": "low", "reasoning_effort": "minimal"})))

    body = server.requests[-1]
    assert (body["verbosity"], body["reasoning_effort"]) == ("low", "minimal")


def test_the_request_body_is_exactly_the_built_parameters(server: FakeOpenAIServer) -> None:
    """The parameters reach the server as built: the SDK's typed transform is
    skipped (chatforge/llm/providers/_openai_client.py) without changing them."""
    from chatforge.llm.providers.openai_compat import request_params

    server.add_script(MODEL, [Reply(text="ok"), Reply(text="ok")])
    request = ask("Weather?", tools=TOOLS, options={"temperature": 0.5, "max_tokens": 30})
    collect(provider(server).stream_turn(request))
    assert server.requests[-1] == request_params(request)
