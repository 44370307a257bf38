"""Logs records carrying an API token (``argv[1]``) in every place a
formatter prints, through the handlers ``chatforge.settings`` configures
(the format from ``CHATFORGE_LOG_FORMAT``): run as a process of its own by
test_log_redaction.py, which reads what it wrote."""

from __future__ import annotations

import logging
import sys

import django


def main(token: str) -> None:
    django.setup()
    from django.test import RequestFactory

    request = RequestFactory().get(f"/api/conversations/?token={token}", HTTP_AUTHORIZATION=f"Bearer {token}")
    django_request = logging.getLogger("django.request")
    ours = logging.getLogger("chatforge.emit")
    # Django's own shape: the request object as an extra field.
    django_request.warning("[emit] request: %s", request.path, extra={"status_code": 401, "request": request})
    # A websocket scope (bytes inside), a nested dict, numbers and booleans beside them.
    scope = {"type": "websocket", "path": "/ws/runs/1/", "query_string": f"after=3&token={token}".encode(),
             "headers": [(b"authorization", f"Bearer {token}".encode())]}
    ours.warning("[emit] scope", extra={"scope": scope, "detail": {"url": f"/x?key={token}", "count": 3, "ok": True}})
    # Objects and containers as the message's arguments.
    ours.info("[emit] arguments: %s %r", request, {"token": token})
    # A traceback whose exception names the token, on a 5xx (which keeps its traceback).
    try:
        raise ValueError(f"bad token {token} at /x?token={token}")
    except ValueError:
        django_request.error("[emit] failed: %s", request.path, exc_info=True,
                             extra={"status_code": 500, "request": request})


if __name__ == "__main__":
    main(sys.argv[1])
