"""Keep a model connection open after a stream that ended at its last event.

The SDKs stop reading a stream at its terminal event and close the
response: the OpenAI SDK breaks out at ``data: [DONE]``, and our Responses
adapter stops at ``response.completed``. The bytes that end the HTTP body
(the chunked encoding's last chunk) are then still unread, and the HTTP
client can only drop such a connection: it cannot tell what else is on the
wire. So every streamed turn opened a new connection to the provider — on
loopback 0.5–1 ms and a new thread in most servers, to a real provider a
TCP and TLS handshake (tens to hundreds of milliseconds) before the model
saw the request (docs/performance.md). The OpenAI SDK has the same report
upstream (a drain after ``[DONE]``); we keep the official SDK and fix it
under it, in the HTTP client the SDK is given.

``drain_on_close(httpx_module)`` is a response hook for an httpx client (the
OpenAI and Anthropic SDKs bundle their own httpx, hence the module): a
response closed before its body was read to the end first reads the rest,
for at most ``DRAIN_S`` and ``DRAIN_MAX_BYTES``. A server sends the end of
the body with its last event or right after it, so a finished stream's
connection goes back to the pool. A stream abandoned mid-answer (a
cancelled turn, a stalled provider) does not end within the bound and is
closed as before; so is one from a server that holds its last small write
back (Nagle's algorithm without TCP_NODELAY: the end arrives after the
client's delayed ACK, 40 ms on Linux), which costs that server's turns
``DRAIN_S`` and no more: waiting out the ACK would cost 40 ms to save a
connection that costs less on a local network.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

# How long, and how much, a close reads on to reach the end of the body.
# The end of a finished stream is a few bytes sent with its last event.
DRAIN_S = 0.005
DRAIN_MAX_BYTES = 64 * 1024


def drain_on_close(httpx: ModuleType) -> Callable[[Any], None]:
    """A ``response`` event hook for ``httpx.Client(event_hooks=...)`` of the
    given httpx module (``httpx`` or the SDKs' ``httpx2``)."""

    class DrainingStream(httpx.SyncByteStream):
        """The response's byte stream, reading its body to the end on close
        (within the bounds) so that the connection can be reused."""

        def __init__(self, inner: Any, request: Any) -> None:
            self._inner = inner
            self._request = request
            self._at_end = False
            self._failed = False
            self._closed = False

        def __iter__(self) -> Iterator[bytes]:
            try:
                yield from self._inner
            except BaseException:
                self._failed = True  # the client has closed the connection
                raise
            self._at_end = True

        def close(self) -> None:
            if self._closed:
                return
            self._closed = True
            if not self._at_end and not self._failed:
                self._read_rest()
            self._inner.close()

        def _read_rest(self) -> None:
            deadline = time.monotonic() + DRAIN_S
            # The transport reads each chunk with the request's read timeout
            # (taken when the body is iterated): bound it for the rest.
            timeouts = self._request.extensions.get("timeout")
            if isinstance(timeouts, dict):
                timeouts["read"] = DRAIN_S
            read = 0
            try:
                # Iterating again continues where the consumer stopped: the
                # HTTP parser holds the connection's position in the body.
                for chunk in self._inner:
                    read += len(chunk)
                    if read > DRAIN_MAX_BYTES or time.monotonic() > deadline:
                        return  # not a stream that ended: drop the connection
                self._at_end = True
            except Exception:  # noqa: BLE001 - a timeout or a broken connection: dropped on close
                return

    def hook(response: Any) -> None:
        if isinstance(response.stream, httpx.SyncByteStream) and not isinstance(response.stream, DrainingStream):
            response.stream = DrainingStream(response.stream, response.request)

    return hook
