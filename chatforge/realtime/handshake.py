"""Refuse a websocket handshake with 503 when Postgres or Redis is down.

Authenticating a websocket (session or API token) and finding the run or
conversation read the database before the handshake is answered. When the
database or Redis cannot be reached there, the server would answer a bare
500 (or drop the connection), which tells a client nothing. ``HandshakeGuard``
wraps the websocket application and answers such a failure as the REST API
does: HTTP 503 with ``Retry-After`` and the JSON error body
``{"error": {"code": "service_unavailable", ...}}``, through the ASGI
"websocket.http.response" extension. A server without that extension gets
the nearest thing the protocol has: the handshake accepted, then closed at
once with 1013 (try again later).

Failures after the handshake are the consumer's to answer (close codes in
``close_codes.py``); other failures before it are left to the server (500).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from chatforge.api.errors import RETRY_AFTER_S, error_body
from chatforge.errors.outages import is_outage

from . import close_codes

logger = logging.getLogger(__name__)

ASGIApp = Callable[[dict[str, Any], Callable, Callable], Awaitable[None]]

DENIAL_EXTENSION = "websocket.http.response"
UNAVAILABLE_MESSAGE = "The service is temporarily unavailable (database or Redis unreachable); reconnect later."
# The messages that answer a handshake; once one is sent it is too late to deny.
_ANSWERS = {"websocket.accept", "websocket.close", "websocket.http.response.start"}


class HandshakeGuard:
    """ASGI middleware: a handshake that fails on an outage is denied with 503."""

    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "websocket":
            await self.inner(scope, receive, send)
            return
        answered = False

        async def watched_send(message: dict[str, Any]) -> None:
            nonlocal answered
            if message["type"] in _ANSWERS:
                answered = True
            await send(message)

        try:
            await self.inner(scope, receive, watched_send)
        except Exception as exc:
            if answered or not is_outage(exc):
                raise
            logger.warning("websocket handshake for %s refused: a service is unreachable: %r",
                           scope.get("path", "?"), exc)
            await deny_unavailable(scope, send)


async def deny_unavailable(scope: dict[str, Any], send: Callable) -> None:
    """Answer the handshake with 503 + Retry-After, or accept-then-1013 when
    the server cannot send an HTTP response to a websocket request."""
    await deny_handshake(scope, send, status=503, code="service_unavailable", message=UNAVAILABLE_MESSAGE,
                         close_code=close_codes.TRY_AGAIN_LATER, retry_after_s=RETRY_AFTER_S)


async def deny_handshake(
    scope: dict[str, Any],
    send: Callable,
    *,
    status: int,
    code: str,
    message: str,
    close_code: int,
    retry_after_s: int | None = None,
) -> None:
    """Refuse a handshake so that the client learns why: an HTTP ``status``
    with the API's JSON error body where the server supports the ASGI
    "websocket.http.response" extension (uvicorn does); otherwise the
    socket is accepted and closed at once with ``close_code`` and the code as
    the reason (closing before accepting would reach the client as a bare
    403, which says nothing)."""
    if DENIAL_EXTENSION in scope.get("extensions", {}):
        body = json.dumps(error_body(code, message)).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if retry_after_s is not None:
            headers.append((b"retry-after", str(retry_after_s).encode()))
        await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
        return
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.close", "code": close_code, "reason": code.replace("_", " ")})
