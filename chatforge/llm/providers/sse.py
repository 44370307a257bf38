"""Server-sent events out of a byte stream, at one split per read.

Models stream one SSE event per token. The OpenAI SDK's decoder walks each
event line by line in Python (a line buffer, a field dispatch, a
``ServerSentEvent`` object per event), then checks the parsed value's type
before handing it on: in a gevent worker reading 100 streams at 50
tokens/s that was about a quarter of the CPU a token cost
(docs/performance.md, "Live text at real model speed"). Here a read's
bytes are split on blank lines in one call, and the common event — one
``data:`` line — is taken without looking at its lines.

It follows the SSE format (https://html.spec.whatwg.org/multipage/server-sent-events.html):
lines end in CRLF, LF or CR; an event ends at a blank line; ``data`` lines
join with a newline; ``event`` names the event; comments (``:``) and other
fields (``id``, ``retry``) are skipped; one space after the colon is
dropped. An event without data is not dispatched.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

Event = tuple[str, bytes]  # (event name, "" when none; data)


class SseDecoder:
    """Feed it the stream's reads; it returns the events each completes."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[Event]:
        buffer = self._buffer + chunk if self._buffer else chunk
        if b"\r" in buffer:
            # A CR at the end may be the first half of a CRLF: keep it for
            # the next read (read alone, it would end a line twice).
            held = b"\r" if buffer.endswith(b"\r") else b""
            buffer = buffer[: len(buffer) - len(held)].replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        else:
            held = b""
        blocks = buffer.split(b"\n\n")
        self._buffer = blocks.pop() + held
        return [event for event in map(_event, blocks) if event is not None]

    def events(self, reads: Iterable[bytes]) -> Iterator[Event]:
        for chunk in reads:
            yield from self.feed(chunk)
        if self._buffer.strip(b"\r\n"):
            # A stream that ends without the blank line after its last
            # event still delivered it (the SDK's decoder does the same).
            event = _event(self._buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n").strip(b"\n"))
            self._buffer = b""
            if event is not None:
                yield event


def _event(block: bytes) -> Event | None:
    if block.startswith(b"data: ") and b"\n" not in block:
        return "", block[6:]  # the common case: one data line
    name = ""
    data: list[bytes] = []
    for line in block.split(b"\n"):
        field, colon, value = line.partition(b":")
        if not colon or not field:
            continue  # a comment, or a line without a field
        if value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            data.append(value)
        elif field == b"event":
            name = value.decode("utf-8", "replace")
    if not data:
        return None
    return name, b"\n".join(data)


def loads(data: bytes) -> Any:
    """JSON of an event's data: orjson's parser (several times faster than
    the standard library's on a chunk), the standard one for what orjson
    refuses but Python's reads (``NaN``, ``Infinity``). Like a browser's
    ``JSON.parse``, orjson reads an integer beyond 64 bits as a float: no
    field of a provider's stream carries one."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)
