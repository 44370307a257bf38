"""No API token reaches a log line, whatever field carries it.

End to end: real servers (JSON lines, and text in debug) are sent a token in
a query string (REST, SSE, /v1, an unknown path, websockets) and in the
``Authorization`` header; their logs hold no ``cf_`` token. Django's
``django.request`` line for a 401 used to print the request, query string
and token included, in its ``request`` field.

In a process of its own per format (``emit_credential_records``): records
through the configured handler with a token in every place a formatter
prints - the message, its arguments, extra fields (an object, a dict, a
scope with bytes), the traceback - come out redacted, and still structured.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import uuid

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from chatforge.observability.log_redaction import RedactCredentialsFilter, redact_event
from tests.support.stack import ROOT, base_env

from .conftest import FORMATS, unique

# A token's shape that no user holds: refused, and counted as one failed token.
UNKNOWN_TOKEN = "cf_" + "Zq9" * 14


def _websocket(url: str, **headers: str) -> None:
    """Open and close a socket, or be refused: either way the handshake is logged."""
    try:
        with connect(url, additional_headers=headers, open_timeout=30):
            pass
    except InvalidStatus:
        pass


def _send_tokens_everywhere(http_url: str, ws_url: str, token: str, conversation: str, run: str) -> None:
    bearer = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=http_url, timeout=30) as client:
        assert client.get(f"/api/conversations/?token={token}").status_code == 401
        assert client.get(f"/api/conversations/?after=1&token={token}", headers=bearer).status_code == 200
        assert client.get("/api/conversations/", headers={"Authorization": f"Bearer {UNKNOWN_TOKEN}"}).status_code == 401
        assert client.get(f"/api/runs/{run}/events/?token={token}").status_code == 401
        assert client.get(f"/v1/models?token={token}").status_code == 401
        assert client.get(f"/no/such/page/?token={token}").status_code == 404
        assert client.get(f"/api/conversations/%00/?token={token}", headers=bearer).status_code == 400
    _websocket(f"{ws_url}/ws/runs/{run}/?token={token}")
    _websocket(f"{ws_url}/ws/conversations/{conversation}/?token={UNKNOWN_TOKEN}")
    _websocket(f"{ws_url}/ws/conversations/{uuid.uuid4()}/?token={token}")
    _websocket(f"{ws_url}/ws/runs/{run}/", **bearer)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_no_token_reaches_the_servers_logs(logging_servers, make_user):
    for log_format in FORMATS:
        server = logging_servers[log_format]
        _, token = make_user()
        with httpx.Client(base_url=server.http_url, timeout=30, headers={"Authorization": f"Bearer {token}"}) as api:
            conversation = api.post("/api/conversations/", json={}).json()["id"]
        start = server.mark()

        # No run is started (a test's run left to a shared stack's workers can
        # deadlock the database flush): an unknown run's routes log their query strings too.
        _send_tokens_everywhere(server.http_url, server.ws_url, token, conversation, str(uuid.uuid4()))

        sentinel = unique("sentinel")
        assert httpx.get(f"{server.http_url}/healthz?probe={sentinel}", timeout=30).status_code == 200
        logged = "\n".join(server.lines_until(start, f"probe={sentinel} HTTP/1.1"))
        assert "cf_" not in logged, f"{log_format}: {logged[-3000:]}"
        # The lines were written (redacted), not left out: Django's 401 line
        # with its request, and uvicorn's websocket line.
        unauthorized = [line for line in logged.splitlines()
                        if "Unauthorized: /api/conversations/" in line and "token=[redacted]" in line]
        assert unauthorized, f"{log_format}: {logged[-3000:]}"
        assert any("WebSocket /ws/runs/" in line and "token=[redacted]" in line for line in logged.splitlines())
        if log_format == "json":
            records = [json.loads(line) for line in logged.splitlines() if line.startswith("{")]
            record = next(r for r in records if r["event"] == "Unauthorized: /api/conversations/"
                          and "token=" in r.get("request", ""))
            assert record["status_code"] == 401  # still a number: structured fields keep their types
            assert record["request"] == "<ASGIRequest: GET '/api/conversations/?token=[redacted]'>"


@pytest.mark.integration
@pytest.mark.parametrize("log_format", FORMATS)
def test_every_field_a_formatter_prints_is_redacted(log_format):
    token = "cf_" + "Ab3_-" * 9
    env = base_env(CHATFORGE_LOG_FORMAT=log_format, CHATFORGE_LOG_LEVEL="INFO",
                   DJANGO_SETTINGS_MODULE="chatforge.settings")
    done = subprocess.run([sys.executable, "-m", "tests.observability.emit_credential_records", token],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True)
    logged = done.stderr + done.stdout
    assert token not in logged and "cf_" not in logged, logged
    for marker in ("[emit] request", "[emit] scope", "[emit] failed", "[emit] arguments", "ValueError"):
        assert marker in logged, (marker, logged)
    assert logged.count("[redacted]") >= 8, logged
    if log_format == "json":
        records = {r["event"].split(":")[0]: r for r in map(json.loads, logged.splitlines())
                   if r.get("event", "").startswith("[emit]")}
        assert records["[emit] request"]["status_code"] == 401
        assert records["[emit] request"]["request"].endswith("?token=[redacted]'>")
        scope = records["[emit] scope"]["scope"]
        assert scope["query_string"] == "after=3&token=[redacted]" and scope["type"] == "websocket"
        assert scope["headers"][0][1] == "Bearer [redacted]"
        assert records["[emit] scope"]["detail"] == {"url": "/x?key=[redacted]", "count": 3, "ok": True}
        failed = records["[emit] failed"]
        assert "ValueError: bad token [redacted]" in failed["exception"] and "Traceback" in failed["exception"]


# ------------------------------------------------------------ in this process

TOKEN = "cf_" + "Q7w-" * 11


class _Request:
    """Shaped like Django's request where it matters here: a repr with the query string."""

    def __repr__(self) -> str:
        return f"<ASGIRequest: GET '/api/runs/?token={TOKEN}'>"


def test_the_filter_redacts_extra_fields_without_changing_the_callers_objects():
    scope = {"type": "websocket", "query_string": f"after=1&token={TOKEN}".encode(), "headers": [(b"a", b"b")]}
    request = _Request()
    record = logging.makeLogRecord({"msg": "refused %s", "args": (f"/x?key={TOKEN}",), "scope": scope,
                                    "status_code": 401, "request": request, "note": f"Bearer {TOKEN}",
                                    "exc_text": f"ValueError: {TOKEN}", "stack_info": f"  at {TOKEN}"})
    assert RedactCredentialsFilter().filter(record) is True
    assert record.getMessage() == "refused /x?key=[redacted]"
    assert record.scope == {"type": "websocket", "query_string": "after=1&token=[redacted]",
                            "headers": [(b"a", b"b")]}
    assert scope["query_string"] == f"after=1&token={TOKEN}".encode()  # the caller's scope is untouched
    assert record.note == "Bearer [redacted]" and record.status_code == 401
    assert record.request is request  # left for other handlers; the formatter prints it redacted
    assert TOKEN not in record.exc_text and TOKEN not in record.stack_info


def test_redact_event_prints_objects_redacted_and_keeps_every_type():
    event = {"event": f"GET /x?token={TOKEN}", "request": _Request(), "status_code": 403, "ok": True,
             "ratio": 0.5, "none": None, "nested": {"urls": [f"/a?token={TOKEN}", 3]}, "plain": _Plain()}
    redacted = redact_event(None, "warning", event)
    assert redacted["event"] == "GET /x?token=[redacted]"
    assert redacted["request"] == "<ASGIRequest: GET '/api/runs/?token=[redacted]'>"
    assert (redacted["status_code"], redacted["ok"], redacted["ratio"], redacted["none"]) == (403, True, 0.5, None)
    assert redacted["nested"] == {"urls": ["/a?token=[redacted]", 3]}
    assert redacted["plain"] is event["plain"]  # nothing to hide: the renderer prints it as before
    assert TOKEN in repr(event["request"])  # the event it was given is not changed


class _Plain:
    def __repr__(self) -> str:
        return "<plain>"
