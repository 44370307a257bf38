"""Which web origins may open a websocket signed in with the session cookie.

A browser sends the session cookie with a websocket handshake whatever page
opened it, so a hostile page could open a socket as the signed-in user and
read their runs (cross-site websocket hijacking). Browsers always send the
page's ``Origin``; it is compared in full - scheme, host and port - with the
allowed origins: ``CHATFORGE_ALLOWED_ORIGINS`` when set, else the origin the
socket was served on (its ``Host`` header and scheme). Comparing host names
only (the allow-list used to be ``ALLOWED_HOSTS``) let ``http://localhost:3000``
or ``https://127.0.0.1`` in.

Behind a TLS-terminating proxy the served origin is seen as ``http://…``
unless uvicorn trusts the proxy's headers (``--proxy-headers``); set
``CHATFORGE_ALLOWED_ORIGINS=https://chat.example.com`` to be explicit.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

Origin = tuple[str, str, int]  # scheme, host (lower case), port

_DEFAULT_PORTS = {"http": 80, "https": 443}


def parse_origin(text: str) -> Origin | None:
    """``(scheme, host, port)`` of an origin such as ``https://chat.example.com``,
    or None for anything else (``null``, a path, an unknown scheme)."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/"):
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


def request_origin(scope: dict[str, Any]) -> str | None:
    """The handshake's ``Origin`` header, as sent (None when absent)."""
    return _header(scope, b"origin")


def served_origin(scope: dict[str, Any]) -> Origin | None:
    """The origin this socket was served on: its Host and scheme (wss → https)."""
    host = _header(scope, b"host")
    if not host:
        return None
    scheme = "https" if scope.get("scheme") == "wss" else "http"
    return parse_origin(f"{scheme}://{host}")


def allowed_origins(scope: dict[str, Any]) -> set[Origin]:
    configured = {parse_origin(o) for o in settings.CHATFORGE_ALLOWED_ORIGINS}
    configured.discard(None)
    if configured:
        return configured  # type: ignore[return-value]
    served = served_origin(scope)
    return {served} if served else set()


def origin_allowed(scope: dict[str, Any]) -> bool:
    """Whether the handshake's Origin is one of the allowed origins (False without one)."""
    origin = request_origin(scope)
    parsed = parse_origin(origin) if origin is not None else None
    return parsed is not None and parsed in allowed_origins(scope)
