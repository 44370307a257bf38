"""Input that used to answer 500 answers a 4xx JSON error a person can act
on: deep JSON, NUL characters and lone surrogates, impossible secret names,
format-suffix paths, odd ids and parameters, wrong methods, failed CSRF
checks and foreign Host headers, on /api, /v1 and the probes."""

from __future__ import annotations

import json
import uuid

import pytest
from django.contrib.auth.models import Permission
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db

DEEP = "[" * 60_000 + "]" * 60_000
NUL = '"a\\u0000b"'
SURROGATE = '"a\\ud800b"'


@pytest.fixture
def owner(make_user, idle_broker, settings):
    settings.CHATFORGE_MESSAGE_RATE = ""
    user, token = make_user()
    user.is_staff = True
    user.save()
    user.user_permissions.add(Permission.objects.get(codename="change_tooldefinition"))
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {token}")
    client.user = user
    client.conversation_id = client.post("/api/conversations/", {}, content_type="application/json").json()["id"]
    return client


def _json_bodies(owner) -> list[tuple[str, str, str]]:
    """(method, path, body template with {v} where a value goes) for every JSON endpoint."""
    return [
        ("post", "/api/conversations/", '{"title": {v}}'),
        ("post", f"/api/conversations/{owner.conversation_id}/messages/", '{"content": {v}}'),
        ("post", f"/api/conversations/{owner.conversation_id}/messages/", '{"content": "hi", "model": {v}}'),
        ("post", f"/api/conversations/{owner.conversation_id}/messages/", '{"content": "hi", "assistant": {v}}'),
        ("post", "/api/tools/test", '{"query": {v}}'),
        ("post", "/api/tools/echo/invoke/", '{"arguments": {"text": {v}}}'),
        ("put", "/api/secrets/some_key/", '{"value": {v}}'),
    ]


def _send(client: Client, method: str, path: str, body: str):
    return getattr(client, method)(path, body, content_type="application/json")


def test_deeply_nested_json_is_a_400_on_every_json_endpoint(owner):
    for method, path, _ in _json_bodies(owner):
        response = _send(owner, method, path, DEEP)
        assert response.status_code == 400, (method, path, response.status_code, response.content[:200])
        assert "nested deeper than 64 levels" in response.json()["error"]["message"], (method, path)


@pytest.mark.parametrize(("value", "says"), [(NUL, "NUL character"), (SURROGATE, "unpaired UTF-16 surrogate")])
def test_text_that_cannot_be_stored_is_a_400_naming_the_field(owner, value, says):
    for method, path, template in _json_bodies(owner):
        response = _send(owner, method, path, template.replace("{v}", value))
        assert response.status_code == 400, (method, path, response.status_code, response.content[:200])
        message = response.json()["error"]["message"]
        assert says in message and "$." in message, (method, path, message)
    # A key is text too.
    response = _send(owner, "post", "/api/conversations/", '{"a\\u0000": 1}')
    assert response.status_code == 400 and "(a key)" in response.json()["error"]["message"]


def test_the_openai_endpoint_refuses_the_same_input_in_its_own_shape(owner):
    cases = [
        DEEP,
        '{"model": ' + NUL + ', "messages": [{"role": "user", "content": "hi"}]}',
        '{"model": "demo", "messages": [{"role": "user", "content": ' + SURROGATE + '}]}',
        '{"model": "demo", "assistant": ' + NUL + ', "messages": [{"role": "user", "content": "hi"}]}',
    ]
    for body in cases:
        response = owner.post("/v1/chat/completions", body, content_type="application/json")
        assert response.status_code == 400, (body[:80], response.content[:200])
        error = response.json()["error"]
        assert error["code"] == "invalid_json" and error["type"] == "invalid_request_error"


def test_secret_names_are_checked_before_they_reach_the_database(owner):
    response = owner.delete("/api/secrets/%00/")
    assert response.status_code == 400
    assert "Invalid secret name" in response.json()["error"]["message"]

    owner.force_login(owner.user)
    page = owner.post("/settings/secrets/%00/delete/", follow=True)
    assert page.status_code == 200
    assert "Invalid secret name" in page.content.decode()


@pytest.mark.parametrize("path", [
    "/api/conversations.json", "/api/tools.json", "/api/conversations/{c}/messages.json",
    "/api/runs/00000000-0000-0000-0000-000000000000/cancel.json", "/api/conversations/{c}.json",
])
def test_format_suffix_paths_are_json_404s(owner, path):
    response = owner.get(path.replace("{c}", owner.conversation_id))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("path", [
    "/api/conversations/%00/", "/api/conversations/%00/messages/", "/api/runs/%00/", "/api/runs/%00/events/",
    "/api/conversations/?limit=%00", "/api/conversations/?offset=%00&limit=1", "/api/runs/%00/cancel/",
    "/api/conversations/?limit=99999999999999999999", "/v1/models/%00",
])
def test_odd_ids_and_parameters_are_client_errors(owner, path):
    method = "post" if path.endswith("cancel/") else "get"
    response = getattr(owner, method)(path)
    assert response.status_code < 500, (path, response.status_code)
    assert response["Content-Type"].startswith("application/json")


@pytest.mark.parametrize(("method", "path", "allowed"), [
    ("post", "/v1/models", "GET"), ("delete", "/v1/models/demo", "GET"), ("get", "/v1/chat/completions", "POST"),
    ("post", "/healthz", "GET, HEAD"), ("delete", "/readyz", "GET, HEAD"),
])
def test_wrong_methods_are_json_405s_with_allow(method, path, allowed):
    # A session with cookies, as a browser would have: the CSRF check used to answer first, in HTML.
    client = Client(enforce_csrf_checks=True)
    response = getattr(client, method)(path)
    assert response.status_code == 405
    assert response["Allow"] == allowed
    assert response["Content-Type"] == "application/json"
    assert "error" in response.json()


def test_a_failed_csrf_check_on_an_api_path_is_json(make_user):
    """Django views under /api/ that take unsafe methods are token views; if one
    ever checks CSRF, the refusal is still JSON."""
    from django.test import RequestFactory

    from chatforge.web.errors import csrf_failure_view

    request = RequestFactory().post("/api/anything/")
    response = csrf_failure_view(request, reason="CSRF cookie not set.")
    assert response.status_code == 403 and json.loads(response.content)["error"]["code"] == "csrf_failed"
    page = csrf_failure_view(RequestFactory().post("/settings/", HTTP_ACCEPT="text/html"), reason="x")
    assert page.status_code == 403 and page["Content-Type"].startswith("text/html")


@pytest.mark.parametrize(("path", "shape"), [("/api/conversations/", "ours"), ("/v1/models", "openai"),
                                             ("/healthz", "ours")])
def test_a_foreign_host_header_is_a_json_400(path, shape):
    with override_settings(ALLOWED_HOSTS=["chatforge.example"], DEBUG=False):
        response = Client(raise_request_exception=False).get(path, HTTP_HOST="evil.example")
    assert response.status_code == 400
    error = response.json()["error"]
    assert "Host header" in error["message"]
    assert ("type" in error) == (shape == "openai")


def test_bad_tokens_on_v1_are_throttled_like_everywhere(make_user):
    address = f"2001:db8::{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}"  # counts outlive a test run
    with override_settings(CHATFORGE_AUTH_FAILURE_LIMIT=2, CHATFORGE_AUTH_FAILURE_WINDOW_S=600):
        client = Client()
        for attempt in range(2):
            assert client.get("/v1/models", HTTP_AUTHORIZATION=f"Bearer cf_bad{attempt}",
                              REMOTE_ADDR=address).status_code == 401
        response = client.get("/v1/models", HTTP_AUTHORIZATION="Bearer cf_bad", REMOTE_ADDR=address)
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert response.json()["error"]["code"] == "throttled"
