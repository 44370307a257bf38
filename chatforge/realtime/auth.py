"""Websocket authentication: the browser's session cookie, or a ChatForge API
token in the ``Authorization: Bearer`` header (non-browser clients) or the
``token`` query parameter (browsers cannot set headers on websockets)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware

from chatforge.accounts.tokens import user_for_token


def _token_from_scope(scope: dict[str, Any]) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    query = parse_qs(scope.get("query_string", b"").decode())
    tokens = query.get("token")
    return tokens[0] if tokens else None


class TokenAuthMiddleware(BaseMiddleware):
    async def __call__(self, scope, receive, send):
        token = _token_from_scope(scope)
        if token:
            user = await database_sync_to_async(user_for_token)(token)
            if user is not None:
                scope = {**scope, "user": user}
        return await super().__call__(scope, receive, send)


def auth_stack(inner):
    """Session auth first; a valid token, when present, takes precedence."""
    return AuthMiddlewareStack(TokenAuthMiddleware(inner))
