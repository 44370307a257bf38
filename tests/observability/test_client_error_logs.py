"""A refused request is one log line without a traceback; a 5xx keeps its
traceback.

A 403 used to write two full tracebacks: Django logs a ``PermissionDenied``
(the admin's pages a staff user may not open) with the exception attached,
and in debug (``make run``) Django's own console handler printed the record
a second time beside ours. End to end, on real servers (JSON with debug off,
text with debug on): each kind of refusal - 400, 401, 403 (admin, REST,
metrics, CSRF), 404, 429 - logs at most one line besides uvicorn's access
line, and no traceback.
"""

from __future__ import annotations

import json
import logging
import sys

import httpx
import pytest
from django.test import Client

from chatforge.observability.client_error_logs import ClientErrorsWithoutTraceback

from .conftest import FORMATS, unique

# (name, method, path, who, expected status, extra headers): ``who`` is
# "anonymous", "user" (an API token) or "staff" (a session of a staff user
# without permissions).
REFUSALS = [
    ("admin page not permitted", "GET", "/admin/catalog/tooldefinition/run/calculator/", "staff", 403, {}),
    ("admin model not permitted", "GET", "/admin/catalog/tooldefinition/", "staff", 403, {}),
    ("REST permission", "POST", "/api/tools/calculator/invoke/", "user", 403, {}),
    ("metrics", "GET", "/metrics", "anonymous", 403, {}),
    ("CSRF", "POST", "/api/conversations/", "staff", 403, {}),
    ("not signed in", "GET", "/api/conversations/", "anonymous", 401, {}),
    ("unknown object", "GET", "/api/conversations/00000000-0000-0000-0000-000000000000/", "user", 404, {}),
    ("unknown page", "GET", "/no/such/page/", "anonymous", 404, {}),
    ("foreign Host header", "GET", "/api/conversations/", "anonymous", 400, {"Host": "evil.example"}),
    ("NUL in the URL", "GET", "/api/conversations/%00/", "user", 400, {}),
]


@pytest.fixture
def credentials(make_user, django_user_model) -> dict[str, dict[str, str]]:
    _, token = make_user()
    staff = django_user_model.objects.create_user(username=unique("staff"), password="pw", is_staff=True)
    session = Client()
    session.force_login(staff)
    return {"anonymous": {}, "user": {"Authorization": f"Bearer {token}"},
            "staff": {"Cookie": f"sessionid={session.cookies['sessionid'].value}"}}


def _is_level(line: str, *levels: str) -> bool:
    if line.startswith("{"):
        return json.loads(line).get("level") in levels
    return any(f"[{level}" in line for level in levels)


def _refused_lines(server, method: str, path: str, headers: dict[str, str], status: int) -> list[str]:
    """What the server logged for one request, its access line excluded."""
    probe = unique("probe")
    start = server.mark()
    separator = "&" if "?" in path else "?"
    response = httpx.request(method, f"{server.http_url}{path}{separator}probe={probe}", headers=headers,
                             json={} if method == "POST" else None, timeout=30)
    assert response.status_code == status, (path, response.status_code, response.text[:300])
    lines = server.lines_until(start, f"probe={probe} HTTP/1.1")
    return lines[:-1]


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("name", "method", "path", "who", "status", "headers"), REFUSALS,
                         ids=[refusal[0] for refusal in REFUSALS])
def test_a_refusal_logs_one_line_without_a_traceback(logging_servers, credentials, name, method, path, who,
                                                     status, headers):
    for log_format in FORMATS:
        logged = _refused_lines(logging_servers[log_format], method, path, {**credentials[who], **headers}, status)
        where = f"{name} ({log_format}):\n" + "\n".join(logged)
        assert not any("Traceback" in line or line.startswith("  File ") for line in logged), where
        assert len(logged) <= 1, where
        # Django logs a foreign Host header as an error (a probe worth seeing), every other refusal as a warning.
        assert all(_is_level(line, "warning", "error" if status == 400 else "warning") for line in logged), where


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_too_many_messages_logs_one_line_without_a_traceback(logging_servers, make_user):
    for log_format in FORMATS:
        server = logging_servers[log_format]
        _, token = make_user()
        bearer = {"Authorization": f"Bearer {token}"}
        conversation = httpx.post(f"{server.http_url}/api/conversations/", json={}, headers=bearer,
                                  timeout=30).json()["id"]
        # The message rate is 1/min per user, counted in Redis for every POST,
        # refused ones too: an empty message (a 400, no run started) takes the
        # minute's one slot, or (a user id an earlier session used within the
        # minute) is already refused; the next is refused.
        for content in ("", "hi"):
            start = server.mark()
            probe = unique("probe")
            response = httpx.post(f"{server.http_url}/api/conversations/{conversation}/messages/?probe={probe}",
                                  json={"content": content}, headers=bearer, timeout=30)
            if response.status_code == 429:
                break
            assert response.status_code == 400, response.text
        assert response.status_code == 429, response.text
        logged = server.lines_until(start, f"probe={probe} HTTP/1.1")[:-1]
        assert len(logged) <= 1 and not any("Traceback" in line for line in logged), logged
        assert all(_is_level(line, "warning") for line in logged), logged


# ------------------------------------------------------------------ the filter


def _record(status: int | None, level: int = logging.WARNING) -> logging.LogRecord:
    try:
        raise PermissionError("refused")
    except PermissionError:
        exc_info = sys.exc_info()
    record = logging.LogRecord("django.request", level, __file__, 1, "Forbidden: %s", ("/x",), exc_info)
    if status is not None:
        record.status_code = status
    return record


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 429])
def test_the_filter_takes_the_traceback_off_a_4xx_record(status):
    record = _record(status)
    assert ClientErrorsWithoutTraceback().filter(record) is True
    assert record.exc_info is None and record.exc_text is None
    assert record.getMessage() == "Forbidden: /x"


@pytest.mark.parametrize("status", [500, 503, None])
def test_a_5xx_and_a_record_without_a_status_keep_their_traceback(status):
    record = _record(status, logging.ERROR)
    assert ClientErrorsWithoutTraceback().filter(record) is True
    assert record.exc_info is not None and record.exc_info[0] is PermissionError


def test_the_configured_handler_has_the_filter_and_the_redaction():
    from django.conf import settings

    handler = settings.LOGGING["handlers"]["stderr"]
    assert handler["filters"] == ["redact_credentials", "client_errors_without_traceback"]
    assert settings.LOGGING["loggers"]["django"]["handlers"] == []

