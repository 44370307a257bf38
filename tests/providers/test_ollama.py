"""The native Ollama adapter (``/api/chat``) against the fake server, over real HTTP."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from chatforge.llm.providers.base import (
    ChatMessage,
    ErrorKind,
    ProviderError,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    TurnRequest,
)
from chatforge.llm.providers.ollama_adapter import (
    NdjsonLines,
    OllamaProvider,
    messages_to_ollama,
    request_body,
    server_root,
)
from tests.fakes.ollama_server import (
    FakeOllamaServer,
    Reply,
    go_json,
    hostile_cuts,
    not_found_message,
    pieces_of,
    text_reply,
)
from tests.providers.streams import collect, texts

MODEL = "qwen3:8b"
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
# Multi-byte characters (2, 3 and 4 bytes), JSON escapes and Go's HTML escapes.
HOSTILE_TEXT = 'Naïve café — “quoted” "really" <b>bold</b> & back\\slash\ttab\nnewline 🎉 日本語 end'
INTERRUPTED_OUTPUT = "Error: this tool call did not finish because the run ended first."


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOllamaServer]:
    with FakeOllamaServer() as fake:
        yield fake


@pytest.fixture(autouse=True)
def clean(server: FakeOllamaServer) -> None:
    server.reset()


def provider(server: FakeOllamaServer, **kwargs: object) -> OllamaProvider:
    options: dict = {"api_key": "", "timeout_s": 10.0, "idle_timeout_s": 5.0, **kwargs}
    return OllamaProvider(base_url=server.base_url, **options)


def ask(
    text: str = "Hello",
    *,
    tools: list[dict] | None = None,
    options: dict | None = None,
    stream: bool = True,
    model: str = MODEL,
) -> TurnRequest:
    return TurnRequest(
        model=model,
        messages=[ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content=text)],
        tools=tools or [],
        options=options or {},
        stream=stream,
    )


def failure(
    server: FakeOllamaServer, request: TurnRequest, **kwargs: object
) -> tuple[ProviderError, list[str]]:
    """The error a turn raised and the text streamed before it."""
    seen: list[str] = []
    with pytest.raises(ProviderError) as caught:
        for item in provider(server, **kwargs).stream_turn(request):
            if isinstance(item, TextDelta):
                seen.append(item.text)
    return caught.value, seen


# --------------------------------------------------------------------------
# Plain answers
# --------------------------------------------------------------------------


def test_text_answer_streams_and_captures_usage(server: FakeOllamaServer) -> None:
    answer = "The quick brown fox jumps over the lazy dog."
    server.add_script(MODEL, text_reply(answer, prompt_eval_count=26, eval_count=11))

    deltas, result = collect(provider(server).stream_turn(ask()))

    assert len(texts(deltas)) > 1
    assert "".join(texts(deltas)) == answer == result.text
    assert result.finish_reason == "stop"
    assert result.tool_calls == []
    assert result.usage == {"prompt_tokens": 26, "completion_tokens": 11, "total_tokens": 37}
    (body,) = server.requests
    assert body["stream"] is True
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello"},
    ]
    assert "tools" not in body and "think" not in body and "options" not in body


def test_non_streaming_yields_one_delta_of_each_kind(server: FakeOllamaServer) -> None:
    server.add_script(MODEL, text_reply("All done here.", thinking="Easy one.", eval_count=4))

    deltas, result = collect(provider(server).stream_turn(ask(stream=False)))

    assert deltas == [ReasoningDelta("Easy one."), TextDelta("All done here.")]
    assert result.text == "All done here." and result.reasoning == "Easy one."
    assert result.usage["completion_tokens"] == 4
    assert server.requests[0]["stream"] is False


def test_thinking_streams_as_reasoning(server: FakeOllamaServer) -> None:
    server.add_script(MODEL, text_reply("42.", thinking="Six times seven is forty-two."))

    deltas, result = collect(provider(server).stream_turn(ask(options={"reasoning_effort": "high"})))

    reasoning = [item.text for item in deltas if isinstance(item, ReasoningDelta)]
    assert len(reasoning) > 1
    assert "".join(reasoning) == "Six times seven is forty-two." == result.reasoning
    assert deltas.index(next(d for d in deltas if isinstance(d, TextDelta))) > 0  # thinking comes first
    assert server.requests[0]["think"] == "high"


def test_length_finish_reason(server: FakeOllamaServer) -> None:
    server.add_script(MODEL, text_reply("Cut sho", done_reason="length"))
    _, result = collect(provider(server).stream_turn(ask()))
    assert result.finish_reason == "length"


@pytest.mark.parametrize(
    ("options", "think_levels", "expected_think", "expected_options"),
    [
        (
            {"reasoning_effort": "low", "temperature": 0.2, "max_tokens": 300},
            True,
            "low",
            {"temperature": 0.2, "num_predict": 300},
        ),
        ({"reasoning_effort": "minimal"}, True, "low", None),
        ({"reasoning_effort": "medium", "verbosity": "low"}, True, "medium", None),
        ({"reasoning_effort": "high"}, False, True, None),
        ({"reasoning_effort": "none"}, True, False, None),
        ({"temperature": 0}, True, None, {"temperature": 0}),
    ],
)
def test_options_map_to_ollama_fields(
    server: FakeOllamaServer,
    options: dict,
    think_levels: bool,
    expected_think: object,
    expected_options: object,
) -> None:
    server.add_script(MODEL, text_reply("ok"))
    collect(provider(server, think_levels=think_levels).stream_turn(ask(options=options)))
    (body,) = server.requests
    assert body.get("think") == expected_think
    assert body.get("options") == expected_options
    assert "verbosity" not in json.dumps(body)


def test_api_key_is_sent_only_when_set(server: FakeOllamaServer) -> None:
    server.add_script(MODEL, text_reply("ok"))
    collect(provider(server).stream_turn(ask()))
    collect(provider(server, api_key="ollama-cloud-key").stream_turn(ask()))
    without, with_key = server.request_headers
    assert "authorization" not in without
    assert with_key["authorization"] == "Bearer ollama-cloud-key"


def test_base_url_may_end_with_api_or_slash() -> None:
    assert server_root("http://localhost:11434/") == "http://localhost:11434"
    assert server_root("https://ollama.com/api") == "https://ollama.com"


# --------------------------------------------------------------------------
# Tool rounds
# --------------------------------------------------------------------------


def _first_round() -> Reply:
    return Reply(
        text="Let me check both. ",
        tool_calls=[("get_weather", {"city": "Paris"}), ("get_time", {"city": "Tōkyō"})],
    )


@pytest.mark.parametrize(
    ("stream", "tool_call_lines"), [(True, "together"), (True, "separate"), (False, "together")]
)
def test_two_rounds_with_parallel_calls(server: FakeOllamaServer, stream: bool, tool_call_lines: str) -> None:
    first = _first_round()
    first.tool_call_lines = tool_call_lines  # type: ignore[assignment]
    server.add_script(MODEL, [first, Reply(text="Sunny, and it is 9 pm.")])
    ollama = provider(server)
    request = ask("Weather and time?", tools=TOOLS, stream=stream)

    _, round_one = collect(ollama.stream_turn(request))

    assert round_one.finish_reason == "tool_calls"
    assert round_one.text == "Let me check both. "
    assert [(c.name, json.loads(c.arguments)) for c in round_one.tool_calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {"city": "Tōkyō"}),
    ]
    weather, clock = round_one.tool_calls
    assert weather.id.startswith("call_") and weather.id != clock.id

    follow_up = TurnRequest(
        model=MODEL,
        messages=[
            *request.messages,
            ChatMessage(role="assistant", content=round_one.text, tool_calls=tuple(round_one.tool_calls)),
            ChatMessage(role="tool", content="Sunny, 24°C", tool_call_id=weather.id, name="get_weather"),
            ChatMessage(role="tool", content="21:00", tool_call_id=clock.id, name="get_time"),
        ],
        tools=TOOLS,
        stream=stream,
    )
    _, round_two = collect(ollama.stream_turn(follow_up))

    assert round_two.text == "Sunny, and it is 9 pm."
    assert round_two.finish_reason == "stop"
    assert len(server.requests) == 2
    sent = server.requests[1]
    assert sent["stream"] is stream
    assert sent["tools"] == TOOLS
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather and time?"},
        {
            "role": "assistant",
            "content": "Let me check both. ",
            "tool_calls": [
                {"id": weather.id, "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                {"id": clock.id, "function": {"name": "get_time", "arguments": {"city": "Tōkyō"}}},
            ],
        },
        {"role": "tool", "content": "Sunny, 24°C", "tool_name": "get_weather", "tool_call_id": weather.id},
        {"role": "tool", "content": "21:00", "tool_name": "get_time", "tool_call_id": clock.id},
    ]


def test_calls_without_ids_get_unique_ids(server: FakeOllamaServer) -> None:
    reply = Reply(
        tool_calls=[("get_time", {}), ("get_time", {"city": "Oslo"})],
        tool_call_ids=False,
        tool_call_index=False,
        tool_call_lines="separate",
    )
    server.add_script(MODEL, [reply])

    _, result = collect(provider(server).stream_turn(ask(tools=TOOLS)))

    first, second = result.tool_calls
    assert first.id and second.id and first.id != second.id
    assert (first.arguments, json.loads(second.arguments)) == ("{}", {"city": "Oslo"})
    assert result.finish_reason == "tool_calls"


def test_string_arguments_from_the_server_are_kept_verbatim(server: FakeOllamaServer) -> None:
    server.add_script(MODEL, [Reply(tool_calls=[("get_weather", '{"city": "Par')])])
    _, result = collect(provider(server).stream_turn(ask(tools=TOOLS)))
    assert result.tool_calls[0].arguments == '{"city": "Par'


def test_stored_rounds_expand_into_ollama_messages() -> None:
    """The sequence ``rounds.expand_rounds`` produces, in the native shape."""
    messages = [
        ChatMessage(role="system", content="You are helpful."),
        ChatMessage(role="user", content="Plan my day in Paris."),
        # Round 1: text and two calls; one result is an error string.
        ChatMessage(
            role="assistant",
            content="Checking weather and museums.",
            tool_calls=(
                ToolCall(id="call_a", name="get_weather", arguments='{"city": "Paris"}'),
                ToolCall(id="call_b", name="search", arguments='{"q": "Louvre <hours>"}'),
            ),
        ),
        ChatMessage(role="tool", content='{"temp": 21}', tool_call_id="call_a", name="get_weather"),
        ChatMessage(
            role="tool", content="Error: search timed out after 30s", tool_call_id="call_b", name="search"
        ),
        # Round 2: calls only; one with invalid JSON, one that never finished.
        ChatMessage(
            role="assistant",
            content=None,
            tool_calls=(
                ToolCall(id="call_c", name="search", arguments='{"q": "Louvre'),
                ToolCall(id="call_d", name="get_weather", arguments=""),
            ),
        ),
        ChatMessage(
            role="tool",
            content="Error: Invalid JSON in tool arguments.",
            tool_call_id="call_c",
            name="search",
        ),
        ChatMessage(role="tool", content=INTERRUPTED_OUTPUT, tool_call_id="call_d", name=None),
        ChatMessage(role="assistant", content="Here is your plan."),
        ChatMessage(role="user", content="Thanks!"),
    ]

    assert messages_to_ollama(messages) == [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Plan my day in Paris."},
        {
            "role": "assistant",
            "content": "Checking weather and museums.",
            "tool_calls": [
                {"id": "call_a", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                {"id": "call_b", "function": {"name": "search", "arguments": {"q": "Louvre <hours>"}}},
            ],
        },
        {"role": "tool", "content": '{"temp": 21}', "tool_name": "get_weather", "tool_call_id": "call_a"},
        {
            "role": "tool",
            "content": "Error: search timed out after 30s",
            "tool_name": "search",
            "tool_call_id": "call_b",
        },
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "call_c", "function": {"name": "search", "arguments": {}}},
                {"id": "call_d", "function": {"name": "get_weather", "arguments": {}}},
            ],
        },
        {
            "role": "tool",
            "content": "Error: Invalid JSON in tool arguments.",
            "tool_name": "search",
            "tool_call_id": "call_c",
        },
        # The name comes from the call it answers when the message lacks one.
        {"role": "tool", "content": INTERRUPTED_OUTPUT, "tool_name": "get_weather", "tool_call_id": "call_d"},
        {"role": "assistant", "content": "Here is your plan."},
        {"role": "user", "content": "Thanks!"},
    ]


def test_replayed_history_is_accepted_by_the_fake(server: FakeOllamaServer) -> None:
    """Arguments that are not objects would be a 400 from Ollama's decoder."""
    server.add_script(MODEL, text_reply("ok"))
    history = [
        ChatMessage(role="user", content="Go"),
        ChatMessage(role="assistant", tool_calls=(ToolCall(id="c1", name="get_time", arguments="[1, 2]"),)),
        ChatMessage(
            role="tool",
            content="Error: Tool arguments must be a JSON object",
            tool_call_id="c1",
            name="get_time",
        ),
    ]
    collect(provider(server).stream_turn(TurnRequest(model=MODEL, messages=history, tools=TOOLS)))
    assert server.requests[0]["messages"][1]["tool_calls"][0]["function"]["arguments"] == {}


def test_request_body_leaves_out_empty_tools() -> None:
    body = request_body(ask(tools=[]))
    assert "tools" not in body


# --------------------------------------------------------------------------
# Framing
# --------------------------------------------------------------------------


@pytest.mark.parametrize("split", ["hostile", "bytes"])
def test_lines_split_anywhere_assemble_exactly(
    server: FakeOllamaServer, split: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    received: list[bytes] = []
    feed = NdjsonLines.feed
    monkeypatch.setattr(NdjsonLines, "feed", lambda self, data: received.append(data) or feed(self, data))
    arguments = {"city": "Zürich 🎉", "note": 'say "hi" <now> & \\ later'}
    server.add_script(
        MODEL,
        [
            Reply(
                text=HOSTILE_TEXT,
                thinking="Überlegung: “ja” <ok>",
                tool_calls=[("get_weather", arguments)],
                split=split,
            )
        ],
    )

    deltas, result = collect(provider(server).stream_turn(ask(tools=TOOLS)))

    assert result.text == HOSTILE_TEXT == "".join(texts(deltas))
    assert result.reasoning == "Überlegung: “ja” <ok>"
    assert json.loads(result.tool_calls[0].arguments) == arguments
    if split == "hostile":  # the pieces really arrived apart: some end mid-character or mid-escape
        assert any(piece.endswith((b"\xc3", b"\xf0", b"\\")) for piece in received)


def test_hostile_split_cuts_inside_keys_escapes_and_characters() -> None:
    line = go_json({"message": {"content": 'é<"🎉'}, "done": False}) + b"\n"
    pieces = pieces_of(line, "hostile")
    assert b"".join(pieces) == line
    cuts = set(hostile_cuts(line))
    content_key = line.index(b'"content"')
    assert content_key + 3 in cuts  # inside the key
    assert line.index(b"\\u003c") + 1 in cuts  # inside an escape
    assert line.index("é".encode()) + 1 in cuts  # inside a 2-byte character
    assert line.index("🎉".encode()) + 2 in cuts  # inside a 4-byte character
    with pytest.raises(UnicodeDecodeError):
        next(piece for piece in pieces if "é".encode()[:1] in piece).decode()


def test_ndjson_lines_byte_by_byte() -> None:
    lines = [go_json({"message": {"content": HOSTILE_TEXT}}), b"", go_json({"done": True})]
    data = b"\r\n".join(lines)  # no newline after the last line
    splitter = NdjsonLines()
    out: list[bytes] = []
    for index in range(len(data)):
        out += splitter.feed(data[index : index + 1])
    tail = splitter.finish()
    assert tail is not None
    decoded = [json.loads(line) for line in [*out, tail]]
    assert decoded == [{"message": {"content": HOSTILE_TEXT}}, {"done": True}]


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(
    ("status", "kind", "retryable", "retry_after", "words"),
    [
        (400, ErrorKind.BAD_REQUEST, False, None, "does not support tools"),
        (403, ErrorKind.PERMISSION, False, None, "forbidden"),
        (429, ErrorKind.RATE_LIMIT, True, 7.0, "rate limiting"),
        (500, ErrorKind.SERVER, True, None, "llama runner process has terminated"),
        (502, ErrorKind.SERVER, True, None, "server error"),
        (503, ErrorKind.OVERLOADED, True, 2.5, "maximum pending requests exceeded"),
    ],
)
def test_http_errors_map_to_kinds(
    server: FakeOllamaServer,
    stream: bool,
    status: int,
    kind: ErrorKind,
    retryable: bool,
    retry_after: float | None,
    words: str,
) -> None:
    message = "registry.ollama.ai/library/gemma:2b does not support tools" if status == 400 else None
    server.add_script(
        MODEL, text_reply("never", fail_status=status, fail_message=message, retry_after_s=retry_after)
    )

    error, _ = failure(server, ask(stream=stream))

    assert (error.kind, error.retryable, error.status_code) == (kind, retryable, status)
    assert error.retry_after_s == retry_after
    assert words in error.message and "Ollama at http://127.0.0.1" in error.message
    assert len(server.requests) == 1


@pytest.mark.parametrize("stream", [True, False])
def test_model_not_pulled_says_how_to_fix_it(server: FakeOllamaServer, stream: bool) -> None:
    error, _ = failure(server, ask(model="llama3.3:70b", stream=stream))
    assert (error.kind, error.retryable, error.status_code) == (ErrorKind.NOT_FOUND, False, 404)
    assert "ollama pull llama3.3:70b" in error.message
    assert not_found_message("llama3.3:70b") in error.message
    assert len(server.requests) == 1


def test_wrong_base_url_is_not_blamed_on_the_model(server: FakeOllamaServer) -> None:
    server.add_script(MODEL, text_reply("never"))
    ollama = OllamaProvider(base_url=server.base_url + "/v1", api_key="")
    with pytest.raises(ProviderError) as caught:
        list(ollama.stream_turn(ask()))
    assert caught.value.kind == ErrorKind.NOT_FOUND and not caught.value.retryable
    assert "base URL" in caught.value.message and "ollama pull" not in caught.value.message


def test_bad_api_key_is_authentication() -> None:
    with FakeOllamaServer(api_key="right") as cloud:
        cloud.add_script(MODEL, text_reply("never"))
        error, _ = failure(cloud, ask(), api_key="wrong")
        assert (error.kind, error.retryable, error.status_code) == (ErrorKind.AUTHENTICATION, False, 401)
        assert "API key" in error.message
        assert len(cloud.requests) == 1


def test_error_line_mid_stream_is_retryable_server_error(server: FakeOllamaServer) -> None:
    server.add_script(MODEL, text_reply("One two three four five six.", error_mid_stream=True))
    error, seen = failure(server, ask())
    assert seen  # some text was forwarded before the failure
    assert (error.kind, error.retryable) == (ErrorKind.SERVER, True)
    assert "unexpected EOF" in error.message
    assert len(server.requests) == 1


def test_dropped_connection_is_connection_error(server: FakeOllamaServer) -> None:
    server.add_script(MODEL, text_reply("One two three four five six.", drop_mid_stream=True))
    error, seen = failure(server, ask())
    assert seen
    assert (error.kind, error.retryable) == (ErrorKind.CONNECTION, True)
    assert len(server.requests) == 1


def test_stream_without_done_line_is_protocol_error(server: FakeOllamaServer) -> None:
    server.add_script(MODEL, text_reply("One two three.", no_done=True))
    error, seen = failure(server, ask())
    assert "".join(seen) == "One two three."
    assert (error.kind, error.retryable) == (ErrorKind.PROTOCOL, True)
    assert "done" in error.message


def test_stall_is_reported_as_stalled(server: FakeOllamaServer) -> None:
    server.add_script(MODEL, text_reply("One two three four five six.", stall_s=2.0))
    error, seen = failure(server, ask(), idle_timeout_s=0.3)
    assert seen
    assert (error.kind, error.retryable) == (ErrorKind.STALLED, True)
    assert "stopped sending" in error.message


def test_total_timeout_ends_a_slow_stream(server: FakeOllamaServer) -> None:
    server.add_script(MODEL, text_reply("word " * 40, chunk_delay_s=0.1))
    error, seen = failure(server, ask(), timeout_s=0.5, idle_timeout_s=5.0)
    assert seen
    assert (error.kind, error.retryable) == (ErrorKind.CONNECTION, True)
    assert "did not finish" in error.message


def test_connection_refused_says_to_start_ollama() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ollama = OllamaProvider(base_url=f"http://127.0.0.1:{port}", api_key="")
    with pytest.raises(ProviderError) as caught:
        list(ollama.stream_turn(ask()))
    assert (caught.value.kind, caught.value.retryable) == (ErrorKind.CONNECTION, True)
    assert f"Could not reach Ollama at http://127.0.0.1:{port}" in caught.value.message
    assert "ollama serve" in caught.value.message


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (b'{"message":{"content":"Hi"},"done":false}\n{"message":{"content":\n', ErrorKind.PROTOCOL),
        (b'{"message":{"content":"Hi"},"done":false}\n[1, 2]\n', ErrorKind.PROTOCOL),
        (b'{"error":"llama runner exited"}\n', ErrorKind.SERVER),
    ],
)
def test_malformed_lines(body: bytes, kind: ErrorKind) -> None:
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, content=body, headers={"Content-Type": "application/x-ndjson"})
    )
    ollama = OllamaProvider(base_url="http://ollama.invalid:11434", api_key="", transport=transport)
    with pytest.raises(ProviderError) as caught:
        list(ollama.stream_turn(ask()))
    assert (caught.value.kind, caught.value.retryable) == (kind, True)


# --------------------------------------------------------------------------
# Cancellation
# --------------------------------------------------------------------------


def test_closing_the_generator_closes_the_connection(server: FakeOllamaServer) -> None:
    server.add_script(MODEL, text_reply("word " * 200, chunk_delay_s=0.02))
    stream = provider(server).stream_turn(ask())

    first = next(stream)
    assert isinstance(first, TextDelta)
    stream.close()

    deadline = time.monotonic() + 10
    while server.disconnects == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.disconnects == 1


# --------------------------------------------------------------------------
# The fake itself
# --------------------------------------------------------------------------


def test_fake_lists_models_and_rejects_string_arguments(server: FakeOllamaServer) -> None:
    server.add_script(MODEL, text_reply("ok"))
    tags = httpx.get(f"{server.base_url}/api/tags").json()
    assert [model["name"] for model in tags["models"]] == [MODEL]

    bad = {
        "model": MODEL,
        "messages": [
            {"role": "user", "content": "Go"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "x", "arguments": "{}"}}],
            },
        ],
    }
    response = httpx.post(f"{server.base_url}/api/chat", json=bad)
    assert response.status_code == 400
    assert "cannot unmarshal string" in response.json()["error"]
