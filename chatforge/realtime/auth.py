"""Websocket authentication, and the Origin rule that goes with it.

A socket is signed in one of two ways:

- **An API token**, sent as ``Authorization: Bearer <token>`` (programs), or
  as the subprotocol pair ``["chatforge.bearer", "<token>"]``
  (``Sec-WebSocket-Protocol``: the one header a browser's ``WebSocket`` can
  set), or - discouraged, since proxies log query strings - ``?token=``. The
  server accepts a subprotocol socket with ``chatforge.bearer`` and never
  echoes the token. Token sockets need no Origin (SDKs and scripts send
  none), but one that sends an Origin must send an allowed one.
- **The session cookie** (the chat page). A browser sends the cookie
  whatever page opened the socket, so such a socket must come from an
  allowed origin (``origins.py``), and one with no Origin is refused.

A token, when present, decides alone: an invalid token is not rescued by a
cookie. Bad tokens count toward the client's failure limit
(``chatforge.accounts.auth_failures``); a throttled client is refused with
429 (close code 4429 where the server cannot answer HTTP).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from django.contrib.auth.models import AnonymousUser

from chatforge.accounts.auth_failures import TooManyFailures, client_of_scope
from chatforge.accounts.tokens import authenticate_token

from . import close_codes, origins
from .handshake import deny_handshake

SUBPROTOCOL = "chatforge.bearer"
# Set in the scope for a socket that authenticated through the subprotocol:
# the consumer accepts with it (a browser closes a socket accepted without it).
SUBPROTOCOL_SCOPE_KEY = "chatforge_subprotocol"


def token_from_scope(scope: dict[str, Any]) -> tuple[str | None, bool]:
    """The token a handshake carries and whether it came as the subprotocol."""
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip(), False
    offered = list(scope.get("subprotocols") or [])
    if SUBPROTOCOL in offered:
        position = offered.index(SUBPROTOCOL)
        if position + 1 < len(offered) and offered[position + 1].strip():
            return offered[position + 1].strip(), True
    tokens = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
    return (tokens[0], False) if tokens else (None, False)


def _origin_refusal(scope: dict[str, Any]) -> str:
    origin = origins.request_origin(scope)
    if origin is None:
        return ("A websocket signed in with the session cookie must send an Origin header (browsers do); "
                "other clients sign in with an API token.")
    shown = origin if len(origin) <= 100 else origin[:100] + "…"
    return (f"Websockets from the origin {shown!r} are not allowed to use this site's session; "
            "the operator lists allowed origins in CHATFORGE_ALLOWED_ORIGINS.")


class WebsocketAuthMiddleware:
    """Runs inside Channels' session middleware: puts the token's user in the
    scope, or checks the Origin of a socket signed in by its cookie."""

    def __init__(self, inner) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive, send) -> None:
        token, as_subprotocol = token_from_scope(scope)
        if token is not None:
            if origins.request_origin(scope) is not None and not origins.origin_allowed(scope):
                await self._forbidden(scope, send)
                return
            try:
                user = await database_sync_to_async(authenticate_token)(token, client=client_of_scope(scope))
            except TooManyFailures as exc:
                await deny_handshake(scope, send, status=429, code="throttled", message=str(exc),
                                     close_code=close_codes.TOO_MANY_REQUESTS, retry_after_s=exc.retry_after_s)
                return
            scope = {**scope, "user": user or AnonymousUser(),
                     SUBPROTOCOL_SCOPE_KEY: SUBPROTOCOL if as_subprotocol else None}
        else:
            user = scope.get("user")
            if user is not None and user.is_authenticated and not origins.origin_allowed(scope):
                await self._forbidden(scope, send)
                return
        await self.inner(scope, receive, send)

    async def _forbidden(self, scope: dict[str, Any], send) -> None:
        await deny_handshake(scope, send, status=403, code="origin_not_allowed", message=_origin_refusal(scope),
                             close_code=close_codes.FORBIDDEN)


def auth_stack(inner):
    """The session first (it needs the cookie), then tokens and the Origin rule."""
    return AuthMiddlewareStack(WebsocketAuthMiddleware(inner))
