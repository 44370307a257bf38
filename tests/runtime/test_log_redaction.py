"""No credential reaches a log line: query values and API-token shapes are
replaced in a record's message and arguments before any handler writes it."""

from __future__ import annotations

import logging

import pytest

from chatforge.observability.log_redaction import RedactCredentialsFilter, redact_credentials

TOKEN = "cf_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0U1v"


@pytest.mark.parametrize(("text", "expected"), [
    (f"/ws/runs/1/?token={TOKEN}", "/ws/runs/1/?token=[redacted]"),
    (f"/x?after=3&token={TOKEN}&y=1", "/x?after=3&token=[redacted]&y=1"),
    ("/x?api_key=sk-123&access_token=abc&apikey=z&key=k&password=p&secret=s",
     "/x?api_key=[redacted]&access_token=[redacted]&apikey=[redacted]&key=[redacted]&password=[redacted]"
     "&secret=[redacted]"),
    (f"Bearer {TOKEN} was refused", "Bearer [redacted] was refused"),
    ("/api/runs/1/?after=5&monkey=1", "/api/runs/1/?after=5&monkey=1"),  # not a credential name
    ("cf_short", "cf_short"),
])
def test_credentials_are_replaced(text, expected):
    assert redact_credentials(text) == expected


def test_the_filter_rewrites_message_and_arguments_and_keeps_the_record():
    record = logging.LogRecord("uvicorn.error", logging.INFO, __file__, 1, '%s - "WebSocket %s" [accepted]',
                               ("127.0.0.1:5000", f"/ws/runs/1/?token={TOKEN}"), None)
    assert RedactCredentialsFilter().filter(record) is True
    assert record.getMessage() == '127.0.0.1:5000 - "WebSocket /ws/runs/1/?token=[redacted]" [accepted]'

    record = logging.LogRecord("x", logging.INFO, __file__, 1, "%(path)s", ({"path": f"/a?key={TOKEN}"},), None)
    RedactCredentialsFilter().filter(record)
    assert record.getMessage() == "/a?key=[redacted]"
