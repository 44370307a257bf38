"""The SSE decoder the OpenAI adapters read streams with
(chatforge/llm/providers/sse.py): the same events as the SDK's own decoder
for any way a stream is cut into reads. What the stream does around it
(``[DONE]``, an ``error`` event mid-stream, a malformed event, a cut
connection, streams split at any byte) is tested through the adapter in
test_openai_compat.py, and keeping the connection in test_connection_reuse.py."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from openai._streaming import SSEDecoder

from chatforge.llm.providers.sse import SseDecoder, loads


def ours(reads: list[bytes]) -> list[tuple[str, str]]:
    return [(name, data.decode()) for name, data in SseDecoder().events(reads)]


def sdks(reads: list[bytes]) -> list[tuple[str, str]]:
    return [(sse.event or "", sse.data) for sse in SSEDecoder().iter_bytes(iter(reads))]


CHUNK = '{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"héllo"}}]}'


def test_the_common_stream_one_data_line_per_event():
    stream = f"data: {CHUNK}\n\ndata: {CHUNK}\n\ndata: [DONE]\n\n".encode()
    assert ours([stream]) == [("", CHUNK), ("", CHUNK), ("", "[DONE]")]


def test_fields_comments_line_endings_and_multi_line_data():
    stream = (
        b": keep-alive comment\r\n\r\n"
        b"event: ping\r\ndata: {}\r\n\r\n"
        b"id: 7\nretry: 100\ndata:first\ndata: second\n\n"
        b"data: cr only\r\r"
        b"event: no data\n\n"
        b"data: last, without the blank line\n"
    )
    assert ours([stream]) == [
        ("ping", "{}"),
        ("", "first\nsecond"),
        ("", "cr only"),
        ("", "last, without the blank line"),
    ]


def test_a_crlf_cut_between_its_two_bytes_ends_the_line_once():
    assert ours([b"data: a\r", b"\ndata: b\r\n\r\n"]) == [("", "a\nb")]


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["", "message", "delta"]),
        st.lists(st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)),
                         max_size=20), min_size=1, max_size=3),
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(
    events=EVENTS,
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(0, 400), max_size=10),
)
def test_any_cut_into_reads_gives_the_sdks_events(events, newline, cuts):
    text = ""
    for name, lines in events:
        if name:
            text += f"event: {name}{newline}"
        text += "".join(f"data: {line}{newline}" for line in lines) + newline
    stream = text.encode()
    points = sorted({min(c, len(stream)) for c in cuts})
    reads = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True) if b > a]
    expected = sdks([stream])
    assert ours(reads) == expected
    if newline != "\r":  # the SDK's own decoder splits lone CRs only within one read
        assert sdks(reads) == expected


def test_json_orjson_refuses_is_still_read():
    assert loads(CHUNK.encode()) == json.loads(CHUNK)
    assert loads(b'{"logprob": -Infinity}') == {"logprob": float("-inf")}  # not JSON, but servers send it
