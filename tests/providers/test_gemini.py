"""The Gemini adapter (google-genai SDK) against the fake Gemini server, over real HTTP."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from google.genai import types

from chatforge.llm.providers._gemini_messages import (
    GEMINI_ID_KEY,
    SKIP_SIGNATURE_SENTINEL,
    THOUGHT_SIGNATURE_KEY,
    to_gemini_prompt,
)
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
from chatforge.llm.providers.gemini_adapter import GeminiProvider, _TurnState
from tests.fakes.gemini_server import (
    SAMPLE_THOUGHT_SIGNATURE,
    FakeGeminiServer,
    Reply,
    function_calls,
    text_reply,
)
from tests.providers.streams import collect, texts

MODEL = "gemini-2.5-flash"
KEY = "test-gemini-key"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "The current time.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]
# Mirror orchestration.transcript.rounds.INTERRUPTED_OUTPUT and tools.messages (rounds.py needs Django).
INTERRUPTED_OUTPUT = "Error: this tool call did not finish because the run ended first."
INVALID_JSON_OUTPUT = "Error: Invalid JSON in tool arguments. Please check the JSON syntax and try again."


@pytest.fixture(scope="module")
def server() -> Iterator[FakeGeminiServer]:
    with FakeGeminiServer(api_key=KEY) as fake:
        yield fake


@pytest.fixture(autouse=True)
def clean(server: FakeGeminiServer) -> None:
    server.reset()
    server.require_thought_signatures = False


def provider(server: FakeGeminiServer, **kwargs: Any) -> GeminiProvider:
    kwargs.setdefault("api_key", KEY)
    kwargs.setdefault("timeout_s", 20)
    return GeminiProvider(base_url=server.base_url, **kwargs)


def ask(
    text: str = "Hello",
    *,
    model: str = MODEL,
    tools: list[dict[str, Any]] | None = None,
    options: dict[str, Any] | None = None,
    stream: bool = True,
) -> TurnRequest:
    return TurnRequest(
        model=model,
        messages=[ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content=text)],
        tools=tools or [],
        options=options or {},
        stream=stream,
    )


def failure(gen: Iterator[StreamItem]) -> tuple[list[StreamItem], ProviderError]:
    seen: list[StreamItem] = []
    with pytest.raises(ProviderError) as caught:
        for item in gen:
            seen.append(item)
    return seen, caught.value


def follow_up(request: TurnRequest, result: TurnResult, outputs: list[str]) -> TurnRequest:
    """The next turn's request: the model's turn, then one result per call."""
    messages = [
        *request.messages,
        ChatMessage(role="assistant", content=result.text or None, tool_calls=tuple(result.tool_calls)),
        *(
            ChatMessage(role="tool", content=output, tool_call_id=call.id, name=call.name)
            for call, output in zip(result.tool_calls, outputs, strict=True)
        ),
    ]
    return TurnRequest(
        model=request.model,
        messages=messages,
        tools=request.tools,
        options=request.options,
        stream=request.stream,
    )


def signature_bytes(text: str) -> bytes:
    return base64.urlsafe_b64decode(text.replace("+", "-").replace("/", "_"))


# --------------------------------------------------------------------------
# Text, usage, reasoning
# --------------------------------------------------------------------------


def test_text_answer_streams_and_captures_usage(server: FakeGeminiServer) -> None:
    answer = "The quick brown fox jumps over the lazy dog."
    usage = {
        "promptTokenCount": 42,
        "candidatesTokenCount": 11,
        "thoughtsTokenCount": 7,
        "cachedContentTokenCount": 30,
        "totalTokenCount": 60,
    }
    server.add_script(MODEL, text_reply(answer, usage=usage))

    items, result = collect(provider(server).stream_turn(ask()))

    assert len(texts(items)) > 1, "the answer should arrive in several deltas"
    assert "".join(texts(items)) == answer == result.text
    assert result.finish_reason == "stop"
    assert result.tool_calls == []
    assert result.usage == {
        "prompt_tokens": 42,
        "completion_tokens": 18,  # candidates + thoughts, as OpenAI counts reasoning
        "total_tokens": 60,
        "reasoning_tokens": 7,
        "cached_tokens": 30,
    }
    assert result.response_id
    (recorded,) = server.recorded
    assert recorded.method == "streamGenerateContent"
    assert recorded.query["alt"] == ["sse"]
    assert recorded.headers["x-goog-api-key"] == KEY
    assert recorded.body["systemInstruction"]["parts"] == [{"text": "Be brief."}]
    assert recorded.body["contents"] == [{"role": "user", "parts": [{"text": "Hello"}]}]
    assert "tools" not in recorded.body


def test_thoughts_stream_as_reasoning_and_effort_maps_to_a_thinking_budget(server: FakeGeminiServer) -> None:
    server.add_script(MODEL, text_reply("Forty-two.", thought="Let me think about the question."))

    items, result = collect(
        provider(server).stream_turn(
            ask(options={"reasoning_effort": "low", "temperature": 0.3, "max_tokens": 256})
        )
    )

    reasoning = [item.text for item in items if isinstance(item, ReasoningDelta)]
    assert "".join(reasoning) == "Let me think about the question." == result.reasoning
    assert result.text == "Forty-two."
    assert items.index(next(i for i in items if isinstance(i, TextDelta))) > items.index(
        next(i for i in items if isinstance(i, ReasoningDelta))
    )
    config = server.requests[0]["generationConfig"]
    assert config["temperature"] == 0.3
    assert config["maxOutputTokens"] == 256
    thinking = {key.replace("_", "").lower(): value for key, value in config["thinkingConfig"].items()}
    assert thinking == {"thinkingbudget": 1024, "includethoughts": True}


def test_gemini_3_gets_a_thinking_level(server: FakeGeminiServer) -> None:
    server.add_script("gemini-3-pro-preview", text_reply("ok"))

    collect(
        provider(server).stream_turn(ask(model="gemini-3-pro-preview", options={"reasoning_effort": "high"}))
    )

    thinking = server.requests[0]["generationConfig"]["thinkingConfig"]
    thinking = {key.replace("_", "").lower(): value for key, value in thinking.items()}
    assert thinking == {"thinkinglevel": "HIGH", "includethoughts": True}


# --------------------------------------------------------------------------
# Tool rounds
# --------------------------------------------------------------------------


def two_round_script() -> list[Reply]:
    return [
        Reply(
            text="Checking both. ",
            tool_calls=[("get_weather", {"city": "Zürich"}), ("get_time", {})],
            thought_signature=SAMPLE_THOUGHT_SIGNATURE,
        ),
        Reply(text="It is sunny in Zürich and noon."),
    ]


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "non-streaming"])
def test_two_rounds_with_parallel_calls(server: FakeGeminiServer, stream: bool) -> None:
    server.add_script(MODEL, two_round_script())
    gemini = provider(server)
    first = ask("Weather and time?", tools=TOOLS, stream=stream)

    items, round_one = collect(gemini.stream_turn(first))

    assert round_one.finish_reason == "tool_calls"  # Gemini said STOP
    assert round_one.text == "Checking both. " == "".join(texts(items))
    assert [(c.name, json.loads(c.arguments)) for c in round_one.tool_calls] == [
        ("get_weather", {"city": "Zürich"}),
        ("get_time", {}),
    ]
    ids = [call.id for call in round_one.tool_calls]
    assert all(call_id.startswith("call_") for call_id in ids) and len(set(ids)) == 2

    second = follow_up(first, round_one, ['{"temperature_c": 21, "sky": "sunny"}', "12:00"])
    items, round_two = collect(gemini.stream_turn(second))

    assert round_two.text == "It is sunny in Zürich and noon."
    assert round_two.finish_reason == "stop"
    if not stream:
        assert texts(items) == [round_two.text], "non-streaming yields the text as one delta"
    methods = [entry.method for entry in server.recorded]
    assert methods == ["streamGenerateContent" if stream else "generateContent"] * 2

    body = server.requests[1]
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Weather for a city.",
                    "parameters": {
                        "type": "OBJECT",
                        "properties": {"city": {"type": "STRING"}},
                        "required": ["city"],
                    },
                },
                {"name": "get_time", "description": "The current time."},
            ]
        }
    ]
    sent_signature = body["contents"][1]["parts"][1]["thoughtSignature"]
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "Weather and time?"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Checking both. "},
                {
                    "functionCall": {"name": "get_weather", "args": {"city": "Zürich"}},
                    "thoughtSignature": sent_signature,
                },
                {"functionCall": {"name": "get_time", "args": {}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "get_weather",
                        "response": {"temperature_c": 21, "sky": "sunny"},
                    }
                },
                {"functionResponse": {"name": "get_time", "response": {"result": "12:00"}}},
            ],
        },
    ]


def test_thought_signature_of_round_one_comes_back_on_round_two(server: FakeGeminiServer) -> None:
    """Gemini 3 answers 400 when the signature is missing (the fake does too here).

    The signature is kept verbatim in ``ToolCall.metadata`` and goes back on
    the part it came with. The SDK writes bytes as URL-safe base64, so the
    text on the wire differs in ``+``/``/`` only: the bytes are identical,
    which is what Gemini (proto JSON accepts both alphabets) compares."""
    server.require_thought_signatures = True
    server.add_script(MODEL, two_round_script())
    gemini = provider(server)
    first = ask("Weather and time?", tools=TOOLS)

    _, round_one = collect(gemini.stream_turn(first))
    first_call, second_call = round_one.tool_calls
    assert first_call.metadata == {THOUGHT_SIGNATURE_KEY: SAMPLE_THOUGHT_SIGNATURE}
    assert second_call.metadata == {}  # Gemini signs only the first of parallel calls

    _, round_two = collect(gemini.stream_turn(follow_up(first, round_one, ["sunny", "noon"])))

    assert round_two.text == "It is sunny in Zürich and noon."
    parts = function_calls(server.requests[1]["contents"][1])
    sent = parts[0]["thoughtSignature"]
    assert signature_bytes(sent) == base64.b64decode(SAMPLE_THOUGHT_SIGNATURE)
    assert sent == SAMPLE_THOUGHT_SIGNATURE.replace("+", "-").replace("/", "_")
    assert "thoughtSignature" not in parts[1]


def test_missing_signature_gets_the_skip_sentinel_for_gemini_3(server: FakeGeminiServer) -> None:
    """Stored rounds may have lost the metadata; Gemini 3 would answer 400."""
    server.require_thought_signatures = True
    model = "gemini-3-flash-preview"
    server.add_script(model, [Reply(tool_calls=[("get_time", {})]), Reply(text="Noon.")])
    request = TurnRequest(
        model=model,
        messages=[
            ChatMessage(role="user", content="Time?"),
            ChatMessage(
                role="assistant", tool_calls=(ToolCall(id="call_1", name="get_time", arguments="{}"),)
            ),
            ChatMessage(role="tool", content="12:00", tool_call_id="call_1", name="get_time"),
        ],
        tools=TOOLS,
    )

    _, result = collect(provider(server).stream_turn(request))

    assert result.text == "Noon."
    part = function_calls(server.requests[0]["contents"][1])[0]
    assert part["thoughtSignature"] == SKIP_SIGNATURE_SENTINEL


def test_gemini_call_ids_are_kept_and_echoed(server: FakeGeminiServer) -> None:
    server.add_script(
        MODEL, [Reply(tool_calls=[("get_time", {}), ("get_time", {})], call_ids=True), Reply(text="Done.")]
    )
    gemini = provider(server)
    first = ask(tools=TOOLS)

    _, round_one = collect(gemini.stream_turn(first))
    ids = [call.id for call in round_one.tool_calls]
    assert all(call_id.startswith("fc-") for call_id in ids) and len(set(ids)) == 2
    assert all(call.metadata == {GEMINI_ID_KEY: True} for call in round_one.tool_calls)

    collect(gemini.stream_turn(follow_up(first, round_one, ["a", "b"])))
    contents = server.requests[1]["contents"]
    assert [p["functionCall"]["id"] for p in function_calls(contents[1])] == ids
    assert [p["functionResponse"]["id"] for p in contents[2]["parts"]] == ids


def test_synthesised_ids_are_stable_per_response_and_unique_across_rounds() -> None:
    def chunk(response_id: str) -> types.GenerateContentResponse:
        return types.GenerateContentResponse.model_validate(
            {
                "responseId": response_id,
                "candidates": [
                    {
                        "content": {
                            "role": "model",
                            "parts": [{"functionCall": {"name": "get_time", "args": {}}}] * 2,
                        },
                        "finishReason": "STOP",
                    }
                ],
            }
        )

    def ids(response_id: str) -> list[str]:
        state = _TurnState(where="Gemini")
        list(state.consume(chunk(response_id)))
        return [call.id for call in state.result().tool_calls]

    assert ids("resp-1") == ids("resp-1")
    assert len(set(ids("resp-1"))) == 2
    assert set(ids("resp-1")).isdisjoint(ids("resp-2"))


def test_hostile_splits_assemble_exactly(server: FakeGeminiServer) -> None:
    """Every event is written in pieces of 1–7 bytes: reads end inside JSON
    keys, inside escapes and inside multi-byte UTF-8 characters."""
    text = 'Grüße 😀 — "quoted" \\ back\\slash\nnew line, 日本語テキスト, tab\there.'
    args = {"city": 'São Paulo "centro" 🌧', "path": "C:\\temp\\x", "note": "line1\nline2"}
    server.add_script(
        MODEL,
        lambda _body: Reply(
            text=text,
            thought="Denke über “Wetter” nach…",
            tool_calls=[("get_weather", args)],
            thought_signature=SAMPLE_THOUGHT_SIGNATURE,
            hostile_splits=True,
        ),
    )

    items, result = collect(provider(server).stream_turn(ask(tools=TOOLS)))

    assert "".join(texts(items)) == text == result.text
    assert result.reasoning == "Denke über “Wetter” nach…"
    (call,) = result.tool_calls
    assert json.loads(call.arguments) == args
    assert call.metadata[THOUGHT_SIGNATURE_KEY] == SAMPLE_THOUGHT_SIGNATURE


# --------------------------------------------------------------------------
# Finish reasons
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("OTHER", "stop"),
    ],
)
def test_finish_reasons_are_normalised(server: FakeGeminiServer, raw: str, expected: str) -> None:
    server.add_script(MODEL, text_reply("Partial", finish_reason=raw))

    _, result = collect(provider(server).stream_turn(ask()))

    assert result.finish_reason == expected


def test_a_blocked_prompt_is_a_content_filter_finish(server: FakeGeminiServer) -> None:
    server.add_script(MODEL, text_reply("", block_prompt="PROHIBITED_CONTENT"))

    _, result = collect(provider(server).stream_turn(ask()))

    assert result.finish_reason == "content_filter"
    assert result.text == ""


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------

ERROR_CASES = [
    pytest.param(Reply(fail_status=400), ErrorKind.BAD_REQUEST, False, None, id="400-invalid-argument"),
    pytest.param(
        Reply(
            fail_status=400,
            fail_status_name="FAILED_PRECONDITION",
            fail_message="User location is not supported.",
        ),
        ErrorKind.BAD_REQUEST,
        False,
        None,
        id="400-failed-precondition",
    ),
    pytest.param(Reply(fail_status=403), ErrorKind.PERMISSION, False, None, id="403"),
    pytest.param(
        Reply(
            fail_status=429, retry_delay="37s", quota_id="GenerateRequestsPerDayPerProjectPerModel-FreeTier"
        ),
        ErrorKind.QUOTA,
        False,
        None,
        id="429-per-day-quota",
    ),
    pytest.param(
        Reply(
            fail_status=429,
            retry_delay="37s",
            quota_id="GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
        ),
        ErrorKind.RATE_LIMIT,
        True,
        37.0,
        id="429-per-minute",
    ),
    pytest.param(
        Reply(fail_status=429, retry_delay="1.5s"), ErrorKind.RATE_LIMIT, True, 1.5, id="429-no-quota"
    ),
    pytest.param(Reply(fail_status=503), ErrorKind.OVERLOADED, True, None, id="503"),
    pytest.param(Reply(fail_status=500), ErrorKind.SERVER, True, None, id="500"),
    pytest.param(Reply(fail_status=504), ErrorKind.SERVER, True, None, id="504"),
]


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "non-streaming"])
@pytest.mark.parametrize(("reply", "kind", "retryable", "retry_after"), ERROR_CASES)
def test_error_statuses_are_classified(
    server: FakeGeminiServer,
    reply: Reply,
    kind: ErrorKind,
    retryable: bool,
    retry_after: float | None,
    stream: bool,
) -> None:
    server.add_script(MODEL, lambda _body: reply)

    seen, error = failure(provider(server).stream_turn(ask(stream=stream)))

    assert seen == []
    assert (error.kind, error.retryable, error.retry_after_s) == (kind, retryable, retry_after)
    assert error.status_code == reply.fail_status
    assert "Gemini API at" in error.message
    assert len(server.requests) == 1, "the SDK must not retry on its own"


def test_a_wrong_key_is_an_authentication_error(server: FakeGeminiServer) -> None:
    server.add_script(MODEL, text_reply("unreachable"))

    _, error = failure(provider(server, api_key="wrong").stream_turn(ask()))

    assert (error.kind, error.retryable, error.status_code) == (ErrorKind.AUTHENTICATION, False, 400)
    assert "API_KEY_INVALID" in error.message and "GEMINI_API_KEY" in error.message
    assert len(server.requests) == 1


def test_an_unknown_model_is_not_found(server: FakeGeminiServer) -> None:
    _, error = failure(provider(server).stream_turn(ask(model="gemini-nope")))

    assert (error.kind, error.retryable, error.status_code) == (ErrorKind.NOT_FOUND, False, 404)
    assert "'gemini-nope'" in error.message
    assert len(server.requests) == 1


def test_an_error_event_mid_stream_is_overloaded(server: FakeGeminiServer) -> None:
    server.add_script(MODEL, text_reply("Some words before the failure arrives.", error_mid_stream=True))

    seen, error = failure(provider(server).stream_turn(ask()))

    assert texts(seen), "text before the error was forwarded"
    assert (error.kind, error.retryable) == (ErrorKind.OVERLOADED, True)
    assert len(server.requests) == 1


def test_a_dropped_connection_is_a_connection_error(server: FakeGeminiServer) -> None:
    server.add_script(MODEL, text_reply("Some words before the connection drops.", drop_mid_stream=True))

    _, error = failure(provider(server).stream_turn(ask()))

    assert (error.kind, error.retryable) == (ErrorKind.CONNECTION, True)


def test_a_stream_without_its_finishing_chunk_is_a_protocol_error(server: FakeGeminiServer) -> None:
    server.add_script(MODEL, text_reply("Words that never finish.", end_without_finish=True))

    seen, error = failure(provider(server).stream_turn(ask()))

    assert texts(seen)
    assert (error.kind, error.retryable) == (ErrorKind.PROTOCOL, True)


def test_malformed_json_is_a_protocol_error(server: FakeGeminiServer) -> None:
    server.add_script(MODEL, text_reply("Words before garbage.", malformed_event=True))

    _, error = failure(provider(server).stream_turn(ask()))

    assert (error.kind, error.retryable) == (ErrorKind.PROTOCOL, True)


def test_a_stall_longer_than_the_idle_timeout_is_stalled(server: FakeGeminiServer) -> None:
    server.add_script(MODEL, text_reply("One two three four five six.", stall_s=1.5))

    seen, error = failure(provider(server, idle_timeout_s=0.3).stream_turn(ask()))

    assert texts(seen)
    assert (error.kind, error.retryable) == (ErrorKind.STALLED, True)
    assert len(server.requests) == 1


def test_a_short_pause_is_not_a_stall(server: FakeGeminiServer) -> None:
    server.add_script(MODEL, text_reply("One two three four five six.", stall_s=0.2))

    _, result = collect(provider(server, idle_timeout_s=5).stream_turn(ask()))

    assert result.text == "One two three four five six."


def test_the_total_timeout_bounds_a_slow_stream(server: FakeGeminiServer) -> None:
    server.add_script(MODEL, text_reply("word " * 40, chunk_delay_s=0.05))

    _, error = failure(provider(server, timeout_s=0.3, idle_timeout_s=5).stream_turn(ask()))

    assert (error.kind, error.retryable) == (ErrorKind.CONNECTION, True)


def test_an_unreachable_server_is_a_connection_error() -> None:
    with FakeGeminiServer() as fake:
        base_url = fake.base_url  # stopped on exit: nothing listens there any more
    gemini = GeminiProvider(base_url=base_url, api_key=KEY, timeout_s=5)

    _, error = failure(gemini.stream_turn(ask()))

    assert (error.kind, error.retryable) == (ErrorKind.CONNECTION, True)


# --------------------------------------------------------------------------
# Cancellation and configuration
# --------------------------------------------------------------------------


def test_closing_the_generator_closes_the_connection(server: FakeGeminiServer) -> None:
    server.add_script(MODEL, text_reply("word " * 400, chunk_delay_s=0.01))
    stream = provider(server).stream_turn(ask())

    first = next(stream)
    assert isinstance(first, TextDelta)
    stream.close()

    deadline = time.monotonic() + 10
    while server.disconnects == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.disconnects == 1


def test_a_versioned_base_url_is_accepted(server: FakeGeminiServer) -> None:
    server.add_script(MODEL, text_reply("ok"))
    gemini = GeminiProvider(base_url=server.base_url + "/v1beta/", api_key=KEY)

    _, result = collect(gemini.stream_turn(ask()))

    assert result.text == "ok"


# --------------------------------------------------------------------------
# Message conversion (stored rounds expanded by orchestration.transcript.rounds.expand_rounds)
# --------------------------------------------------------------------------


def test_expanded_rounds_convert_to_gemini_contents() -> None:
    signed = ToolCall(
        id="call_a",
        name="search",
        arguments='{"q": "cats"}',
        metadata={THOUGHT_SIGNATURE_KEY: "c2lnbmF0dXJl"},
    )
    plain = ToolCall(id="call_b", name="fetch", arguments='{"url": "https://example.com"}')
    unfinished = ToolCall(id="call_c", name="fetch", arguments='{"url": "https://slow.example.com"}')
    broken = ToolCall(id="call_d", name="search", arguments='{"q": ')
    messages = [
        ChatMessage(role="system", content="You are helpful."),
        ChatMessage(role="user", content="Find cats."),
        # Round 1: text and two calls; one result is an error string.
        ChatMessage(role="assistant", content="Let me search.", tool_calls=(signed, plain)),
        ChatMessage(role="tool", content='[{"title": "Cats"}]', tool_call_id="call_a", name="search"),
        ChatMessage(
            role="tool", content="Error executing tool 'fetch': HTTP 500", tool_call_id="call_b", name="fetch"
        ),
        # Round 2: calls only; one never finished, one had invalid JSON.
        ChatMessage(role="assistant", content=None, tool_calls=(unfinished, broken)),
        ChatMessage(role="tool", content=INTERRUPTED_OUTPUT, tool_call_id="call_c", name="fetch"),
        ChatMessage(
            role="tool",
            content=INVALID_JSON_OUTPUT,
            tool_call_id="call_d",
            name=None,  # the name is found through the call id
        ),
        ChatMessage(role="assistant", content="Here is what I found."),
        ChatMessage(role="user", content="Thanks!"),
    ]

    prompt = to_gemini_prompt(messages)

    assert prompt.system_instruction == "You are helpful."
    assert prompt.contents == [
        {"role": "user", "parts": [{"text": "Find cats."}]},
        {
            "role": "model",
            "parts": [
                {"text": "Let me search."},
                {
                    "functionCall": {"name": "search", "args": {"q": "cats"}},
                    "thoughtSignature": "c2lnbmF0dXJl",
                },
                {"functionCall": {"name": "fetch", "args": {"url": "https://example.com"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "search", "response": {"result": '[{"title": "Cats"}]'}}},
                {
                    "functionResponse": {
                        "name": "fetch",
                        "response": {"error": "Error executing tool 'fetch': HTTP 500"},
                    }
                },
            ],
        },
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "fetch", "args": {"url": "https://slow.example.com"}}},
                {"functionCall": {"name": "search", "args": {"invalid_json": '{"q": '}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "fetch", "response": {"error": INTERRUPTED_OUTPUT}}},
                {
                    "functionResponse": {
                        "name": "search",
                        "response": {"error": INVALID_JSON_OUTPUT},
                    }
                },
            ],
        },
        {"role": "model", "parts": [{"text": "Here is what I found."}]},
        {"role": "user", "parts": [{"text": "Thanks!"}]},
    ]


def test_signature_fallback_marks_only_unsigned_call_turns() -> None:
    signed = ToolCall(id="a", name="f", arguments="{}", metadata={THOUGHT_SIGNATURE_KEY: "c2ln"})
    unsigned = ToolCall(id="b", name="f", arguments="{}")
    messages = [
        ChatMessage(role="user", content="Go."),
        ChatMessage(role="assistant", tool_calls=(signed,)),
        ChatMessage(role="tool", content="1", tool_call_id="a", name="f"),
        ChatMessage(role="assistant", tool_calls=(unsigned, ToolCall(id="c", name="f", arguments="{}"))),
        ChatMessage(role="tool", content="2", tool_call_id="b", name="f"),
        ChatMessage(role="tool", content="3", tool_call_id="c", name="f"),
    ]

    contents = to_gemini_prompt(messages, signature_fallback=True).contents

    assert [p.get("thoughtSignature") for p in contents[1]["parts"]] == ["c2ln"]
    assert [p.get("thoughtSignature") for p in contents[3]["parts"]] == [SKIP_SIGNATURE_SENTINEL, None]
    assert contents[4]["parts"][0]["functionResponse"]["response"] == {"result": "2"}


def test_sampling_options_and_a_forced_tool_reach_the_wire(server: FakeGeminiServer) -> None:
    server.add_script(MODEL, text_reply("{}"))
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    collect(provider(server).stream_turn(ask(tools=TOOLS, options={
        "top_p": 0.5, "stop": "END", "seed": 3, "presence_penalty": 0.5, "frequency_penalty": -1.0,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
        "tool_choice": {"type": "function", "function": {"name": TOOLS[0]["function"]["name"]}},
    })))
    body = server.requests[0]
    config = {key.replace("_", "").lower(): value for key, value in body["generationConfig"].items()}
    assert (config["topp"], config["stopsequences"], config["seed"]) == (0.5, ["END"], 3)
    assert (config["presencepenalty"], config["frequencypenalty"]) == (0.5, -1.0)
    assert config["responsemimetype"] == "application/json" and config["responsejsonschema"] == schema
    calling = body["toolConfig"]["functionCallingConfig"]
    assert calling["mode"] == "ANY"
    assert calling["allowedFunctionNames"] == [TOOLS[0]["function"]["name"]]
