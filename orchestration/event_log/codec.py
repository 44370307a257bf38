"""Events as JSON: how the log stores them and how sockets and SSE send them.

orjson, not the standard library: every streamed delta is encoded once by
the worker that appends it, decoded by every web process that follows the
run, and encoded again for each socket, so at real model speed these are
thousands of calls a second per process (docs/performance.md, "Live text at
real model speed"); orjson does each in a fraction of the time. The output
is the same JSON: compact, UTF-8, non-ASCII text as is. Anything orjson
cannot encode (an integer beyond 64 bits, a key that is not a string) falls
back to the standard library, so no event is refused for its encoder; such
an integer, which no event carries, would be read back as a float (as a
browser's ``JSON.parse`` reads it).
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def encode(value: Any) -> bytes:
    """Compact UTF-8 JSON of an event (or any JSON value)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def text(value: Any) -> str:
    """The same JSON as a ``str`` (a websocket text frame, an SSE ``data:`` line)."""
    return encode(value).decode()


def decode(data: bytes | str) -> Any:
    """An event as stored (the standard library reads what orjson refuses,
    such as ``NaN`` written by an older version)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)
