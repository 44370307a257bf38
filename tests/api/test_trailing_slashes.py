"""Both spellings of every API route reach its view: ``/api/x/`` and
``/api/x``, ``/v1/x`` and ``/v1/x/``. Never a redirect (a redirected POST
loses its body) and never "no such endpoint".

The routes come from the URLconf itself, so a route added later is checked
without anyone remembering to list it here."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from chatforge.conversations.models import Run
from tests.support.files import PNG_BYTES

pytestmark = pytest.mark.django_db

API_ROOTS = ("api/", "v1/")
# Delete last: it removes what the other requests use.
METHODS = ("get", "post", "put", "patch", "delete")
_REGEX_GROUP = re.compile(r"\(\?P<(\w+)>[^)]*\)")
_CONVERTER = re.compile(r"<(?:\w+:)?(\w+)>")


def _piece(pattern) -> str:
    """A pattern's text without its regex anchors or optional final slash."""
    return str(pattern.pattern).removeprefix("^").removesuffix("$").removesuffix("/?")


def _routes(patterns, prefix: str = "") -> Iterator[str]:
    """Every route of the URLconf as one pattern string, includes joined."""
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _routes(pattern.url_patterns, prefix + _piece(pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + _piece(pattern)


def api_routes() -> list[str]:
    return sorted({route for route in _routes(get_resolver().url_patterns) if route.startswith(API_ROOTS)})


def _concrete(route: str, values: dict[str, str]) -> str:
    """``api/runs/<str:run_id>/events/`` → ``/api/runs/<a run's id>/events/``:
    each parameter takes the value of the collection it follows."""
    collection = route.split("/")[1]

    def value(match: re.Match) -> str:
        key = f"{collection}.{match.group(1)}"
        assert key in values, f"{route}: teach this test a value for {key}"
        return values[key]

    return "/" + _CONVERTER.sub(value, _REGEX_GROUP.sub(value, route))


def _spellings(path: str) -> tuple[str, str]:
    return (path, path.rstrip("/")) if path.endswith("/") else (path, path + "/")


@pytest.fixture
def owner(make_user, idle_broker, settings) -> Client:
    """Staff with the permission to run tools directly: every route's view
    answers them with a 2xx or a 4xx of its own."""
    settings.CHATFORGE_MESSAGE_RATE = ""
    user, token = make_user()
    user.is_staff = True
    user.save()
    user.user_permissions.add(Permission.objects.get(codename="change_tooldefinition"))
    return Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {token}")


def test_the_walk_finds_the_routes_people_call_without_a_slash():
    routes = api_routes()
    for expected in ("api/tools/test/", "api/runs/<str:run_id>/events/", "api/secrets/<str:name>/",
                     "v1/chat/completions", "v1/models"):
        assert expected in routes, routes
    assert any(route.startswith("api/tools/") and route.endswith("/invoke/") for route in routes), routes


def test_every_api_route_answers_both_spellings_without_a_redirect(owner):
    conversation_id = owner.post("/api/conversations/", {}, content_type="application/json").json()["id"]
    run_id = owner.post(f"/api/conversations/{conversation_id}/messages/", {"content": "hi"},
                        content_type="application/json").json()["run_id"]
    file_id = owner.post("/api/files/", {"file": SimpleUploadedFile("pixel.png", PNG_BYTES)}).json()["id"]
    values = {
        "conversations.pk": conversation_id,
        "conversations.conversation_id": conversation_id,
        "conversations.share_id": "5b0f7c52-6a0e-4d5e-9a57-0c2f3f3b7a10",  # no such share: the view's 404
        "files.pk": file_id,
        "messages.pk": str(Run.objects.get(pk=run_id).user_message_id),
        "runs.pk": run_id,
        "runs.run_id": run_id,
        "runs.tool_call_id": "call_1",
        "tools.pk": "echo",
        "tools.name": "echo",
        "secrets.name": "some_key",
        "models.model": "demo",
    }
    paths = [_concrete(route, values) for route in api_routes()]
    checked = 0
    for method in METHODS:
        for path in paths:
            for spelling in _spellings(path):
                body = {} if method == "get" else {"data": "{}", "content_type": "application/json"}
                response = getattr(owner, method)(spelling, **body)
                where = f"{method.upper()} {spelling}"
                assert not 300 <= response.status_code < 400, f"{where} answered {response.status_code}"
                assert response.status_code < 500, f"{where} answered {response.status_code}"
                if response.status_code == 404 and not response.streaming:
                    assert b"No such endpoint" not in response.content, f"{where} reached no view"
                checked += 1
    assert checked >= 2 * len(METHODS) * 15


def test_a_post_without_the_slash_keeps_its_body(owner):
    created = owner.post("/api/conversations", {"title": "kept"}, content_type="application/json")
    assert created.status_code == 201 and created.json()["title"] == "kept"

    invoked = owner.post("/api/tools/echo/invoke", {"arguments": {"text": "still here"}},
                         content_type="application/json")
    assert invoked.status_code == 200, invoked.content[:300]
    assert "still here" in str(invoked.json()["result"])

    tested = owner.post("/api/tools/test", {"query": "x" * 100_001}, content_type="application/json")
    assert tested.status_code == 400 and "query" in tested.json()["error"]["message"]
