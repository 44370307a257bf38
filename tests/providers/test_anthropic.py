"""The Anthropic adapter: message conversion as a unit, everything else over
real HTTP against the fake Messages API."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from chatforge.llm.providers._anthropic_messages import MISSING_RESULT, to_anthropic, tool_input
from chatforge.llm.providers.anthropic_adapter import AnthropicProvider
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
from tests.fakes.anthropic_server import FakeAnthropicServer, Reply, split_pieces, text_reply
from tests.providers.streams import collect, texts

MODEL = "claude-fake"
API_KEY = "sk-ant-test"
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
# What orchestration.transcript.rounds gives a call that never finished (importing it needs Django).
INTERRUPTED_OUTPUT = "Error: this tool call did not finish because the run ended first."
CACHE = {"type": "ephemeral"}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer(api_key=API_KEY) as fake:
        yield fake


@pytest.fixture(autouse=True)
def clean(server: FakeAnthropicServer) -> None:
    server.reset()


def provider(server: FakeAnthropicServer, *, api_key: str = API_KEY, **kwargs: object) -> AnthropicProvider:
    return AnthropicProvider(base_url=server.base_url, api_key=api_key, **{"timeout_s": 10.0, **kwargs})


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


def follow_up(
    first_request: TurnRequest, first: TurnResult, outputs: list[str], **changes: object
) -> TurnRequest:
    """The next request of the turn: the calls and their results appended."""
    fields = {
        "model": MODEL,
        "messages": [
            *first_request.messages,
            ChatMessage(role="assistant", content=first.text or None, tool_calls=tuple(first.tool_calls)),
            *(
                ChatMessage(role="tool", content=output, tool_call_id=call.id, name=call.name)
                for call, output in zip(first.tool_calls, outputs, strict=True)
            ),
        ],
        "tools": first_request.tools,
        "options": first_request.options,
        "stream": first_request.stream,
    }
    return TurnRequest(**{**fields, **changes})


# -- message conversion ------------------------------------------------------


def test_expanded_rounds_become_anthropic_messages() -> None:
    weather = ToolCall(id="toolu_1", name="get_weather", arguments='{"city": "Paris"}')
    clock = ToolCall(id="toolu_2", name="get_time", arguments="")
    broken = ToolCall(id="toolu_3", name="get_weather", arguments='{"city": "Par')
    unfinished = ToolCall(id="toolu_4", name="get_time", arguments='{"tz": "UTC"}')
    messages = [
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="Weather and time in Paris?"),
        # Round 1: text and two parallel calls, one failing.
        ChatMessage(role="assistant", content="Let me check.", tool_calls=(weather, clock)),
        ChatMessage(role="tool", content='{"sky": "sunny"}', tool_call_id="toolu_1", name="get_weather"),
        ChatMessage(role="tool", content="Error: clock unavailable", tool_call_id="toolu_2", name="get_time"),
        # Round 2: invalid arguments, and a call that never finished.
        ChatMessage(role="assistant", content=None, tool_calls=(broken, unfinished)),
        ChatMessage(
            role="tool", content="Error: invalid JSON arguments", tool_call_id="toolu_3", name="get_weather"
        ),
        ChatMessage(role="tool", content=INTERRUPTED_OUTPUT, tool_call_id="toolu_4", name="get_time"),
        ChatMessage(role="assistant", content="Sunny; the clock is down."),
        ChatMessage(role="user", content="Thanks!"),
    ]

    conversation = to_anthropic(messages)

    assert conversation.system == [{"type": "text", "text": "Be brief.", "cache_control": CACHE}]
    assert conversation.messages == [
        {"role": "user", "content": [{"type": "text", "text": "Weather and time in Paris?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_2", "name": "get_time", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"sky": "sunny"}'},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "Error: clock unavailable",
                    "is_error": True,
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_3",
                    "name": "get_weather",
                    "input": {"_raw": '{"city": "Par'},
                },
                {"type": "tool_use", "id": "toolu_4", "name": "get_time", "input": {"tz": "UTC"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_3",
                    "content": "Error: invalid JSON arguments",
                    "is_error": True,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_4",
                    "content": INTERRUPTED_OUTPUT,
                    "is_error": True,
                },
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Sunny; the clock is down."}]},
        {"role": "user", "content": [{"type": "text", "text": "Thanks!"}]},
    ]


def test_merging_and_pairing_repairs() -> None:
    call = ToolCall(id="toolu_1", name="get_time", arguments="{}")
    messages = [
        ChatMessage(role="user", content="one"),
        ChatMessage(role="system", content="Late system note."),
        ChatMessage(role="user", content="two"),
        ChatMessage(role="assistant", content="   "),  # whitespace only: dropped
        ChatMessage(role="user", content="three"),
        ChatMessage(role="assistant", content="Checking.", tool_calls=(call,)),
        # no result for toolu_1; a person's message and an orphaned result follow
        ChatMessage(role="user", content="still there?"),
        ChatMessage(role="tool", content="12:00", tool_call_id="toolu_9", name="get_time"),
    ]

    conversation = to_anthropic(messages)

    assert conversation.system == [{"type": "text", "text": "Late system note.", "cache_control": CACHE}]
    assert conversation.messages == [
        {
            "role": "user",
            "content": [{"type": "text", "text": t} for t in ("one", "two", "three")],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_time", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": MISSING_RESULT,
                    "is_error": True,
                },
                {"type": "text", "text": "still there?"},
                {"type": "text", "text": "(Result of get_time, call toolu_9): 12:00"},
            ],
        },
    ]


def test_thinking_blocks_in_metadata_are_replayed_first() -> None:
    thinking = [
        {"type": "thinking", "thinking": "Hmm.", "signature": "sig"},
        {"type": "redacted_thinking", "data": "x"},
    ]
    call = ToolCall(id="toolu_1", name="get_time", arguments="{}", metadata={"anthropic_thinking": thinking})
    conversation = to_anthropic(
        [
            ChatMessage(role="user", content="Time?"),
            ChatMessage(role="assistant", content="Checking.", tool_calls=(call,)),
            ChatMessage(role="tool", content="12:00", tool_call_id="toolu_1", name="get_time"),
        ]
    )

    assert [b["type"] for b in conversation.messages[1]["content"]] == [
        "thinking",
        "redacted_thinking",
        "text",
        "tool_use",
    ]
    assert conversation.messages[1]["content"][0] == thinking[0]
    assert not conversation.continues_tool_use_without_thinking()


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("", {}),
        ("  ", {}),
        ('{"a": ', {"_raw": '{"a": '}),
        ("[1, 2]", {"_raw": "[1, 2]"}),
    ],
)
def test_tool_input_is_always_an_object(arguments: str, expected: dict) -> None:
    assert tool_input(arguments) == expected


# -- over HTTP -----------------------------------------------------------------


def test_text_answer_streams_with_usage_and_request_shape(server: FakeAnthropicServer) -> None:
    answer = "The quick brown fox jumps over the lazy dog."
    usage = {
        "input_tokens": 20,
        "output_tokens": 9,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 5,
    }
    server.add_script(MODEL, [Reply(text=answer, usage=usage)])

    deltas, result = collect(
        provider(server).stream_turn(ask(tools=TOOLS, options={"temperature": 1.7, "verbosity": "low"}))
    )

    assert len(texts(deltas)) > 3
    assert "".join(texts(deltas)) == answer == result.text
    assert (result.tool_calls, result.finish_reason, result.reasoning_details) == ([], "stop", None)
    assert result.usage == {
        "prompt_tokens": 125,
        "completion_tokens": 9,
        "total_tokens": 134,
        "cached_tokens": 100,
    }
    assert result.response_id and result.response_id.startswith("msg_")
    body = server.requests[-1]
    assert body["stream"] is True
    assert body["max_tokens"] == 4096
    assert "temperature" not in body  # API version 2026-10-21 refuses sampling parameters
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": CACHE}]
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]
    assert [t["name"] for t in body["tools"]] == ["get_weather", "get_time"]
    assert body["tools"][-1]["cache_control"] == CACHE and "cache_control" not in body["tools"][0]
    assert body["tools"][0]["input_schema"] == TOOLS[0]["function"]["parameters"]
    assert "tool_choice" not in body and "thinking" not in body and "verbosity" not in body
    assert server.request_headers[-1]["authorization"] == f"Bearer {API_KEY}"


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "non-streaming"])
def test_two_rounds_with_parallel_calls(server: FakeAnthropicServer, stream: bool) -> None:
    weather = {"city": 'Edinburgh "Old" Town', "note": "back\\slash"}
    server.add_script(
        MODEL,
        [
            Reply(text="Let me check.", tool_calls=[("get_weather", weather), ("get_time", {})]),
            Reply(text="Sunny, and noon."),
        ],
    )
    adapter = provider(server)
    first_request = ask("Weather and time?", tools=TOOLS, stream=stream, options={"max_tokens": 500})

    first_deltas, first = collect(adapter.stream_turn(first_request))

    assert texts(first_deltas) if stream else texts(first_deltas) == ["Let me check."]
    assert first.text == "Let me check."
    assert first.finish_reason == "tool_calls"
    assert [(call.name, json.loads(call.arguments)) for call in first.tool_calls] == [
        ("get_weather", weather),
        ("get_time", {}),
    ]
    assert all(call.id.startswith("toolu_") for call in first.tool_calls)
    assert first.usage["prompt_tokens"] > 0 and first.usage["completion_tokens"] > 0

    outputs = ['{"sky": "sunny"}', "Error: clock unavailable"]
    _, second = collect(adapter.stream_turn(follow_up(first_request, first, outputs)))

    assert second.text == "Sunny, and noon."
    assert second.finish_reason == "stop"
    body = server.requests[-1]
    assert body.get("stream", False) is stream
    assert body["max_tokens"] == 500
    ids = [call.id for call in first.tool_calls]
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": ids[0], "name": "get_weather", "input": weather},
                {"type": "tool_use", "id": ids[1], "name": "get_time", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": ids[0], "content": outputs[0]},
                {"type": "tool_result", "tool_use_id": ids[1], "content": outputs[1], "is_error": True},
            ],
        },
    ]


def test_hostile_splits_assemble_exactly(server: FakeAnthropicServer) -> None:
    # Raw JSON text with escapes, a surrogate-pair escape and raw multi-byte characters.
    arguments = '{"city": "Z\\u00fcrich \\"Alt\\" \\\\ \\ud83d\\ude00", "place": "Zürich 日本 😀", "n": 1}'
    sizes = (4, 11, 8, 16, 7)
    pieces = split_pieces(arguments, sizes)
    assert pieces[:5] == [
        '{"ci',  # cut inside a key
        'ty": "Z\\u00',  # inside a \\u escape
        "fcrich \\",  # between a backslash and the quote it escapes
        '"Alt\\" \\\\ \\ud83d',  # between the two halves of a surrogate pair
        '\\ude00"',
    ]
    text = "Grüße aus Zürich — 日本語 😀."
    server.add_script(
        MODEL,
        [Reply(text=text, tool_calls=[("get_weather", arguments)], json_piece_sizes=sizes, byte_split=True)],
    )

    deltas, result = collect(provider(server).stream_turn(ask(tools=TOOLS)))

    assert "".join(texts(deltas)) == result.text == text
    assert [call.arguments for call in result.tool_calls] == [arguments]
    assert json.loads(result.tool_calls[0].arguments) == {
        "city": 'Zürich "Alt" \\ 😀',
        "place": "Zürich 日本 😀",
        "n": 1,
    }


def test_invalid_arguments_are_kept_and_replayed_as_raw(server: FakeAnthropicServer) -> None:
    server.add_script(MODEL, [Reply(tool_calls=[("get_weather", '{"city": "Par')]), Reply(text="Sorry.")])
    adapter = provider(server)
    first_request = ask(tools=TOOLS)

    _, first = collect(adapter.stream_turn(first_request))
    assert first.tool_calls[0].arguments == '{"city": "Par'

    collect(adapter.stream_turn(follow_up(first_request, first, ["Error: arguments are not valid JSON"])))

    tool_use = server.requests[-1]["messages"][1]["content"][0]
    assert tool_use["input"] == {"_raw": '{"city": "Par'}


def test_thinking_streams_and_is_replayed_with_tool_calls(server: FakeAnthropicServer) -> None:
    server.add_script(
        MODEL,
        [
            Reply(thinking="The user wants the time. I should call the tool.", tool_calls=[("get_time", {})]),
            Reply(thinking="Got it.", text="It is noon."),
        ],
    )
    adapter = provider(server)
    first_request = ask("Time?", tools=TOOLS, options={"reasoning_effort": "medium", "temperature": 0.3})

    deltas, first = collect(adapter.stream_turn(first_request))

    reasoning = [item.text for item in deltas if isinstance(item, ReasoningDelta)]
    assert "".join(reasoning) == first.reasoning == "The user wants the time. I should call the tool."
    assert first.reasoning_details is not None
    [detail] = first.reasoning_details
    assert detail["type"] == "thinking" and detail["thinking"] == first.reasoning
    assert detail["signature"].startswith("sig_")
    assert first.tool_calls[0].metadata == {"anthropic_thinking": first.reasoning_details}
    body = server.requests[-1]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert body["max_tokens"] == 4096 + 8192
    assert "temperature" not in body

    _, second = collect(adapter.stream_turn(follow_up(first_request, first, ["12:00"])))

    assert second.text == "It is noon."
    replayed = server.requests[-1]["messages"][1]["content"]
    assert replayed[0] == detail
    assert [block["type"] for block in replayed] == ["thinking", "tool_use"]
    assert server.requests[-1]["thinking"]["type"] == "enabled"


def test_adaptive_thinking_mode_sends_effort(server: FakeAnthropicServer) -> None:
    server.add_script(MODEL, [Reply(thinking="Quick check.", text="Done.")])

    _, result = collect(
        provider(server, thinking_mode="adaptive").stream_turn(ask(options={"reasoning_effort": "minimal"}))
    )

    assert result.reasoning == "Quick check."
    body = server.requests[-1]
    assert body["thinking"] == {"type": "adaptive"}
    assert body["output_config"] == {"effort": "low"}
    assert body["max_tokens"] == 4096


def test_continuation_without_thinking_blocks_goes_without_thinking(server: FakeAnthropicServer) -> None:
    server.add_script(MODEL, [Reply(thinking="Call it.", tool_calls=[("get_time", {})]), Reply(text="Noon.")])
    adapter = provider(server)
    first_request = ask("Time?", tools=TOOLS, options={"reasoning_effort": "low"})
    _, first = collect(adapter.stream_turn(first_request))
    assert server.requests[-1]["thinking"]["budget_tokens"] == 2048
    # A stored round that lost the calls' metadata.
    stripped = TurnResult(
        text=first.text,
        tool_calls=[ToolCall(c.id, c.name, c.arguments) for c in first.tool_calls],
        finish_reason="tool_calls",
    )

    _, second = collect(adapter.stream_turn(follow_up(first_request, stripped, ["12:00"])))

    assert second.text == "Noon."
    assert "thinking" not in server.requests[-1]  # the fake would have answered 400
    assert server.requests[-1]["max_tokens"] == 4096


def test_final_turn_without_tools_declares_the_called_ones(server: FakeAnthropicServer) -> None:
    server.add_script(MODEL, [Reply(tool_calls=[("get_time", {})]), Reply(text="Out of tool budget.")])
    adapter = provider(server)
    first_request = ask("Time?", tools=TOOLS)
    _, first = collect(adapter.stream_turn(first_request))

    _, final = collect(adapter.stream_turn(follow_up(first_request, first, ["12:00"], tools=[])))

    assert final.text == "Out of tool budget."
    body = server.requests[-1]
    assert body["tool_choice"] == {"type": "none"}
    assert [tool["name"] for tool in body["tools"]] == ["get_time"]


def test_non_streaming_yields_reasoning_text_and_result(server: FakeAnthropicServer) -> None:
    server.add_script(MODEL, [Reply(thinking="Easy.", text="Forty-two.")])

    items, result = collect(
        provider(server).stream_turn(ask(stream=False, options={"reasoning_effort": "high"}))
    )

    assert items == [ReasoningDelta("Easy."), TextDelta("Forty-two.")]
    assert (result.text, result.reasoning, result.finish_reason) == ("Forty-two.", "Easy.", "stop")
    assert result.reasoning_details and result.reasoning_details[0]["signature"].startswith("sig_")
    assert result.usage["total_tokens"] == result.usage["prompt_tokens"] + result.usage["completion_tokens"]
    assert "stream" not in server.requests[-1] or server.requests[-1]["stream"] is False
    assert server.requests[-1]["thinking"]["budget_tokens"] == 16384


@pytest.mark.parametrize(
    ("stop_reason", "finish_reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
    ],
)
def test_stop_reasons_are_normalised(
    server: FakeAnthropicServer, stop_reason: str, finish_reason: str
) -> None:
    server.add_script(MODEL, text_reply("Partial", stop_reason=stop_reason))

    _, result = collect(provider(server).stream_turn(ask()))

    assert result.finish_reason == finish_reason


# -- errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "kind", "retryable", "status", "retry_after_s", "words"),
    [
        (
            Reply(fail_status=400, fail_message="messages: bad"),
            ErrorKind.BAD_REQUEST,
            False,
            400,
            None,
            "rejected the request (400 invalid_request_error): messages: bad",
        ),
        (Reply(fail_status=402), ErrorKind.QUOTA, False, 402, None, "billing"),
        (Reply(fail_status=403), ErrorKind.PERMISSION, False, 403, None, "refused access"),
        (Reply(fail_status=413), ErrorKind.BAD_REQUEST, False, 413, None, "request_too_large"),
        (Reply(fail_status=429, retry_after="7"), ErrorKind.RATE_LIMIT, True, 429, 7.0, "rate limiting"),
        (
            Reply(fail_status=429, fail_error_code="enforced_spend_limit_reached", retry_after="7"),
            ErrorKind.QUOTA,
            False,
            429,
            None,
            "spend limits",
        ),
        (Reply(fail_status=500), ErrorKind.SERVER, True, 500, None, "server error (500 api_error)"),
        (Reply(fail_status=503, retry_after="2"), ErrorKind.SERVER, True, 503, 2.0, "server error"),
        (
            Reply(fail_status=529, retry_after="1.5"),
            ErrorKind.OVERLOADED,
            True,
            529,
            1.5,
            "overloaded (529 overloaded_error)",
        ),
    ],
    ids=["400", "402", "403", "413", "429", "429-spend-limit", "500", "503", "529"],
)
def test_status_errors_are_classified(
    server: FakeAnthropicServer,
    reply: Reply,
    kind: ErrorKind,
    retryable: bool,
    status: int,
    retry_after_s: float | None,
    words: str,
) -> None:
    server.add_script(MODEL, [reply])

    with pytest.raises(ProviderError) as caught:
        list(provider(server).stream_turn(ask()))

    error = caught.value
    assert (error.kind, error.retryable, error.status_code, error.retry_after_s) == (
        kind,
        retryable,
        status,
        retry_after_s,
    )
    assert words in error.message
    assert f"Anthropic API at {server.base_url}" in error.message
    assert "[request-id req_" in error.message
    assert len(server.requests) == 1  # the SDK did not retry


def test_bad_api_key(server: FakeAnthropicServer) -> None:
    server.add_script(MODEL, text_reply("unreachable"))

    with pytest.raises(ProviderError) as caught:
        list(provider(server, api_key="sk-wrong").stream_turn(ask()))

    error = caught.value
    assert (error.kind, error.retryable, error.status_code) == (ErrorKind.AUTHENTICATION, False, 401)
    assert "rejected the API key (401 authentication_error): invalid x-api-key" in error.message
    assert "Check ANTHROPIC_API_KEY or your anthropic_api_key secret." in error.message
    assert len(server.requests) == 1


def test_unknown_model(server: FakeAnthropicServer) -> None:
    with pytest.raises(ProviderError) as caught:
        list(provider(server).stream_turn(ask(stream=False)))

    error = caught.value
    assert (error.kind, error.retryable, error.status_code) == (ErrorKind.NOT_FOUND, False, 404)
    assert repr(MODEL) in error.message
    assert len(server.requests) == 1


def test_error_event_after_200_is_overloaded(server: FakeAnthropicServer) -> None:
    server.add_script(
        MODEL, [Reply(text="This answer will not finish properly at all.", error_event_after_200=True)]
    )
    received: list[StreamItem] = []

    with pytest.raises(ProviderError) as caught:
        for item in provider(server).stream_turn(ask()):
            received.append(item)

    assert texts(received)  # some text was forwarded before the failure
    error = caught.value
    assert (error.kind, error.retryable, error.status_code) == (ErrorKind.OVERLOADED, True, 529)
    assert "failed mid-stream (overloaded_error): Overloaded" in error.message
    assert len(server.requests) == 1


def test_error_event_of_a_client_fault_is_not_retryable(server: FakeAnthropicServer) -> None:
    server.add_script(
        MODEL,
        [Reply(text="a b c d e f", error_event_after_200=True, error_event_type="invalid_request_error")],
    )

    with pytest.raises(ProviderError) as caught:
        list(provider(server).stream_turn(ask()))

    assert (caught.value.kind, caught.value.retryable) == (ErrorKind.BAD_REQUEST, False)


def test_connection_dropped_mid_stream(server: FakeAnthropicServer) -> None:
    server.add_script(MODEL, [Reply(text="This answer is cut off halfway through.", drop_mid_stream=True)])

    with pytest.raises(ProviderError) as caught:
        list(provider(server).stream_turn(ask()))

    assert (caught.value.kind, caught.value.retryable) == (ErrorKind.CONNECTION, True)
    assert len(server.requests) == 1


def test_stalled_stream(server: FakeAnthropicServer) -> None:
    server.add_script(MODEL, [Reply(text="This answer pauses for far too long.", stall_s=2.0)])

    with pytest.raises(ProviderError) as caught:
        list(provider(server, idle_timeout_s=0.3).stream_turn(ask()))

    assert (caught.value.kind, caught.value.retryable) == (ErrorKind.STALLED, True)
    assert "stopped sending data for 0.3 s" in caught.value.message
    assert len(server.requests) == 1


def test_stream_without_message_stop_is_a_protocol_error(server: FakeAnthropicServer) -> None:
    server.add_script(MODEL, [Reply(text="Almost done.", omit_message_stop=True)])

    with pytest.raises(ProviderError) as caught:
        list(provider(server).stream_turn(ask()))

    assert (caught.value.kind, caught.value.retryable) == (ErrorKind.PROTOCOL, True)
    assert "message_stop" in caught.value.message


def test_malformed_event_data_is_a_protocol_error(server: FakeAnthropicServer) -> None:
    server.add_script(MODEL, [Reply(text="Some words before the garbage.", malformed_mid_stream=True)])

    with pytest.raises(ProviderError) as caught:
        list(provider(server).stream_turn(ask()))

    assert (caught.value.kind, caught.value.retryable) == (ErrorKind.PROTOCOL, True)
    assert "malformed" in caught.value.message


def test_unreachable_server() -> None:
    with FakeAnthropicServer() as doomed:
        base_url = doomed.base_url
    adapter = AnthropicProvider(base_url=base_url, api_key="k", connect_timeout_s=1)

    with pytest.raises(ProviderError) as caught:
        list(adapter.stream_turn(ask()))

    assert (caught.value.kind, caught.value.retryable) == (ErrorKind.CONNECTION, True)
    assert base_url in caught.value.message


def test_closing_the_generator_early_closes_the_connection(server: FakeAnthropicServer) -> None:
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
