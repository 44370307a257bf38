"""Text from a request never reaches a query as a 500: every route of the
URLconf (the REST API, /v1, the web pages, the admin, the probes) is walked
with a NUL character (``%00``) in each of its path parameters and in the
query parameters the views and the admin read, and with over-long values
and values that are not the id they stand for; a cookie holding a NUL is
ignored. (Websockets: test_websocket_text.py; JSON bodies:
tests/api/test_bad_input.py, tests/openai_api/test_bad_input.py.)

Postgres text cannot hold NUL (psycopg raises ``DataError`` before the
query is sent): ``POST /api/runs/{id}/tool-calls/%00/decision/`` by the
run's owner answered 500, as did the admin's search. A NUL anywhere in a
URL is now a 400 (``chatforge/api/nul_guard.py``): JSON on the API paths
(OpenAI's shape on /v1), Django's 400 page elsewhere. Values that are only
wrong (too long, not a UUID) answer as a missing object does (the admin's
conversation page answered a non-UUID id with a 500).

The routes are read from the resolver, so a new route is walked without
editing this file; the values that stand for real objects are the owner's.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from tests.support.files import image_file

pytestmark = pytest.mark.django_db

NUL = "a%00b"
LONG = "x" * 3000
NOT_AN_ID = "not-a-uuid"
# Query parameters some view or admin page reads: search, paging, resuming, filters, sorting.
QUERY_NAMES = ("q", "after", "limit", "offset", "source", "cursor", "status", "o", "p", "e", "all", "next",
               "_changelist_filters", "user__id__exact", "tool_call_id", "model")
# The paths whose every error is JSON (chatforge/web/errors.py); elsewhere a 400 is Django's page.
_API_PREFIXES = ("/api/", "/v1/", "/healthz", "/readyz")

_ROUTE_PARAM = re.compile(r"<(?:\w+:)?(\w+)>")
_REGEX_PARAM = re.compile(r"\(\?P<(\w+)>[^)]*\)")


def _template(pattern: Any) -> str:
    """A route's pattern as text with ``{name}`` where each parameter goes."""
    text = str(pattern)
    if _REGEX_PARAM.search(text) or text.startswith("^") or text.endswith("$"):
        text = _REGEX_PARAM.sub(lambda m: "{" + m.group(1) + "}", text).lstrip("^").rstrip("$")
        return text.replace("\\", "")
    return _ROUTE_PARAM.sub(lambda m: "{" + m.group(1) + "}", text)


def _walk(patterns: list, prefix: str = "") -> list[str]:
    found: list[str] = []
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            found += _walk(pattern.url_patterns, prefix + _template(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            found.append("/" + prefix + _template(pattern.pattern))
    return found


ROUTES = sorted(set(_walk(get_resolver().url_patterns)))


@pytest.fixture
def world(django_user_model, idle_broker, settings) -> dict[str, Any]:
    """A superuser (every admin page runs its queries for them) who owns a
    conversation with a run, a secret and an API token."""
    from chatforge.accounts.models import ApiToken
    from chatforge.accounts.secrets import user_secret_set
    from chatforge.accounts.tokens import api_token_create

    settings.CHATFORGE_MESSAGE_RATE = ""
    owner = django_user_model.objects.create_superuser(username="owner", password="pw")
    token = api_token_create(user=owner, name="walk").plaintext
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {token}")
    client.force_login(owner)
    conversation = client.post("/api/conversations/", {}, content_type="application/json").json()["id"]
    accepted = client.post(f"/api/conversations/{conversation}/messages/", {"content": "hi"},
                           content_type="application/json")
    assert accepted.status_code == 202, accepted.content
    user_secret_set(user=owner, name="walk_key", value="walk-secret")
    file = image_file(owner)
    share = client.post(f"/api/conversations/{conversation}/shares/").json()
    return {"client": client, "owner": owner, "conversation": conversation, "run": accepted.json()["run_id"],
            "token_id": str(ApiToken.objects.get(user=owner).pk), "file": str(file.pk),
            "share": share["id"], "share_token": share["url"].rstrip("/").rsplit("/", 1)[1]}


def _value(world: dict[str, Any], route: str, name: str) -> str:
    """A real value for a parameter: the owner's object, so the view gets as
    far as the query the parameter under test reaches."""
    if name == "pk":
        if route.startswith("/api/files/"):
            return world["file"]
        return world["run"] if route.startswith("/api/runs/") else world["conversation"]
    return {
        "run_id": world["run"], "conversation_id": world["conversation"], "tool_call_id": "call_1",
        "name": "walk_key" if "secrets" in route else "calculator", "token_id": world["token_id"],
        "tool_name": "calculator", "model": "demo", "object_id": "1", "content_type_id": "1",
        "app_label": "catalog", "url": "nothing", "id": str(world["owner"].pk),
        "share_id": world["share"], "token": world["share_token"],
    }[name]


def _path(world: dict[str, Any], route: str, **given: str) -> str:
    names = re.findall(r"\{(\w+)\}", route)
    return route.format(**{name: given.get(name) or _value(world, route, name) for name in names})


def _send(client: Client, method: str, path: str):
    if method == "post":
        return client.post(path, "{}", content_type="application/json")
    return client.get(path)


def _is_api(path: str) -> bool:
    return path.startswith(_API_PREFIXES)


def _assert_refused(response, path: str, method: str) -> None:
    where = f"{method.upper()} {path[:120]}"
    assert response.status_code == 400, f"{where}: {response.status_code} {response.content[:300]!r}"
    if _is_api(path):
        assert response["Content-Type"].startswith("application/json"), where
        error = response.json()["error"]
        assert "NUL" in error["message"], (where, error)


def _assert_client_error(response, path: str, method: str) -> None:
    where = f"{method.upper()} {path[:120]}"
    assert response.status_code < 500, f"{where}: {response.status_code} {response.content[:300]!r}"
    if _is_api(path) and response.status_code >= 400:
        assert response["Content-Type"].startswith("application/json"), where
        assert "error" in response.json(), where


def test_the_walk_sees_the_routes_that_answered_500():
    assert "/api/runs/{pk}/tool-calls/{tool_call_id}/decision/" in ROUTES
    assert "/admin/catalog/tooldefinition/" in ROUTES and "/v1/models/{model}" in ROUTES
    assert "/admin/conversations/conversation/{object_id}/change/" in ROUTES
    assert len(ROUTES) > 100


@pytest.mark.parametrize("route", ROUTES)
def test_every_route_refuses_a_nul_and_answers_bad_values_as_a_client_error(world, route):
    """Per route: a NUL in each path parameter (GET and POST) and in the query
    is a 400; an over-long value or one that is not the id it stands for, in
    each path parameter and in the query, answers below 500."""
    client = world["client"]
    for name in re.findall(r"\{(\w+)\}", route):
        for method in ("get", "post"):
            path = _path(world, route, **{name: NUL})
            _assert_refused(_send(client, method, path), path, method)
            for value in (LONG, NOT_AN_ID):
                path = _path(world, route, **{name: value})
                _assert_client_error(_send(client, method, path), path, method)
    path = _path(world, route) + "?" + "&".join(f"{query_name}={NUL}" for query_name in QUERY_NAMES)
    _assert_refused(_send(client, "get", path), path, "get")
    path = _path(world, route) + "?" + "&".join(f"{query_name}={LONG}" for query_name in QUERY_NAMES)
    _assert_client_error(_send(client, "get", path), path, "get")


@pytest.mark.parametrize("query_name", ["q", "source", "status", "model", "tool_call_id"])
def test_a_nul_in_the_admins_search_and_filters_is_a_400(world, query_name):
    """Each of these answered 500 on some admin list page."""
    for route in ("/admin/conversations/conversation/", "/admin/conversations/message/",
                  "/admin/conversations/run/", "/admin/catalog/assistant/", "/admin/llm/modelvalidation/"):
        path = f"{route}?{query_name}={NUL}"
        _assert_refused(_send(world["client"], "get", path), path, "get")


def test_a_nul_in_the_decision_route_was_a_500_and_is_a_400_naming_the_path(world):
    response = world["client"].post(f"/api/runs/{world['run']}/tool-calls/%00/decision/",
                                    {"decision": "approve"}, content_type="application/json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert "NUL" in error["message"] and "path" in error["message"]


def test_a_nul_on_v1_answers_in_openais_shape(world):
    response = world["client"].get("/v1/models/de%00mo")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and "NUL" in error["message"]


def test_a_web_page_gets_djangos_400_page(world):
    response = world["client"].get("/c/%00/", HTTP_ACCEPT="text/html")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")


# What Django's cookie parser unescapes to NUL characters (a quoted value with octal escapes).
NUL_COOKIE = '"\\000\\000\\000\\000\\000\\000\\000\\000\\000\\000"'


@pytest.mark.parametrize("path", ["/api/conversations/", "/", "/settings/", "/admin/", "/v1/models", "/healthz",
                                  "/api/runs/00000000-0000-0000-0000-000000000000/events/"])
def test_a_session_cookie_holding_a_nul_is_ignored(path):
    """It answered 500 on every route, signed in or not: the session was
    looked up with it. Now the request goes on without it: signed out."""
    response = Client(raise_request_exception=False, HTTP_COOKIE=f"sessionid={NUL_COOKIE}").get(path)
    assert response.status_code < 500, (path, response.status_code, response.content[:300])
    assert response.status_code in (200, 302, 401, 403), (path, response.status_code)


def test_the_other_cookies_still_count(world):
    """Only the cookie holding the NUL is dropped: the session beside it still signs the user in."""
    session = Client(raise_request_exception=False)
    session.force_login(world["owner"])
    cookie = f'junk={NUL_COOKIE}; sessionid={session.cookies["sessionid"].value}'
    assert Client(HTTP_COOKIE=cookie).get("/api/conversations/").status_code == 200
    assert Client(HTTP_COOKIE=cookie).get("/settings/").status_code == 200
