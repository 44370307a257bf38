"""Websocket handshakes: the same NUL rule as HTTP requests (``chatforge/api/nul_guard.py``),
as ASGI middleware, since websockets do not pass through Django's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from chatforge.api.nul_guard import cookie_header_without_nul, holds_nul, url_problem

from . import close_codes
from .handshake import deny_handshake

ASGIApp = Callable[[dict[str, Any], Callable, Callable], Awaitable[None]]


class WebsocketNulGuard:
    """ASGI middleware for the websocket routes: the same rule as
    ``RefuseNulInURL``, before the session and authentication run."""

    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] == "websocket":
            problem = url_problem(scope.get("path", ""), scope.get("query_string", b"").decode("latin-1"))
            if problem is not None:
                await deny_handshake(scope, send, status=400, code="invalid_request", message=problem,
                                     close_code=close_codes.BAD_REQUEST)
                return
            headers = scope.get("headers") or []
            if any(name == b"cookie" and holds_nul(value.decode("latin-1")) for name, value in headers):
                scope = {**scope, "headers": [
                    (name, cookie_header_without_nul(value) if name == b"cookie" else value)
                    for name, value in headers
                ]}
        await self.inner(scope, receive, send)
