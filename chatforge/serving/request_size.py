"""Request bodies refused before they are read, not after.

Django's ASGI handler reads a request's whole body (into a temporary file)
before any middleware or view runs, so the limits the views apply
(``DATA_UPLOAD_MAX_MEMORY_SIZE``, the files' ``CHATFORGE_MAX_FILE_BYTES``)
came only after a 2 GB upload had been received and written to disk. Here
the handler refuses a body over the route's limit first:

- by its ``Content-Length``, at once: 413, and not a byte of the body read
  (a client that sent ``Expect: 100-continue`` is never told to send it);
- for a body without one (``Transfer-Encoding: chunked``), by counting the
  bytes as they arrive: 413 as soon as the count passes the limit, and
  nothing more is read.

Either way the answer closes the connection (``Connection: close``): what
is left of the body is never read. The limit for an upload
(``POST /api/files/``) is CHATFORGE_MAX_FILE_BYTES and a margin for the
multipart envelope around the file (its part headers, boundaries and form
fields); the view's upload handler holds the file itself to the exact
limit. Every other route keeps CHATFORGE_MAX_REQUEST_BYTES
(``DATA_UPLOAD_MAX_MEMORY_SIZE``), with the same margin, so that whatever
Django would still take reaches it and gets Django's own answer.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings

UPLOAD_PATHS = frozenset({"/api/files/", "/api/files"})
# Room for the multipart envelope around the file: its part headers and
# boundaries, and the form's other small fields (conversation_id).
ENVELOPE_MARGIN_BYTES = 64 * 1024
OPENAI_PREFIX = "/v1/"

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class BodyTooLarge(Exception):
    """Raised from ``receive`` once a body without a length passes its limit."""


def request_path(scope: dict[str, Any]) -> str:
    """The request's path below the application's root (``root_path``)."""
    path = scope.get("path", "")
    root = scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


def _is_upload(scope: dict[str, Any]) -> bool:
    return scope.get("method") == "POST" and request_path(scope) in UPLOAD_PATHS


def body_limit(scope: dict[str, Any]) -> int | None:
    """The most body bytes this request may send; None: no limit here."""
    if _is_upload(scope):
        return settings.CHATFORGE_MAX_FILE_BYTES + ENVELOPE_MARGIN_BYTES
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return None if limit is None else limit + ENVELOPE_MARGIN_BYTES


def declared_length(scope: dict[str, Any]) -> int | None:
    """The request's ``Content-Length``, if it sent one that reads as a number."""
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the server rejects a malformed length itself
    return None


def capped(receive: Receive, limit: int) -> Receive:
    """``receive`` counting the body's bytes, raising BodyTooLarge past ``limit``."""
    received = 0

    async def receive_capped() -> dict[str, Any]:
        nonlocal received
        message = await receive()
        if message.get("type") == "http.request":
            received += len(message.get("body", b""))
            if received > limit:
                raise BodyTooLarge()
        return message

    return receive_capped


async def send_too_large(scope: dict[str, Any], send: Send) -> None:
    """The 413, in the shape the path's clients read (OpenAI's on /v1/)."""
    path = request_path(scope)
    if _is_upload(scope):
        limit = settings.CHATFORGE_MAX_FILE_BYTES
        code = "file_too_large"
        message = (f"The upload is larger than the limit of {limit} bytes per file; it was refused before "
                   "it was read.")
    else:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        code = "request_too_large"
        message = f"The request body is larger than {limit} bytes; send less."
    if path.startswith(OPENAI_PREFIX):
        body: dict[str, Any] = {"error": {"message": message, "type": "invalid_request_error", "param": None,
                                          "code": code}}
    else:
        body = {"error": {"code": code, "message": message, "details": {"limit_bytes": limit}}}
    payload = json.dumps(body).encode()
    await send({
        "type": "http.response.start",
        "status": 413,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
                    (b"connection", b"close")],
    })
    await send({"type": "http.response.body", "body": payload})
