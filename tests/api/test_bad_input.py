"""Input that used to answer 500 on /api and the probes answers a 4xx JSON
error a person can act on: deep JSON, NUL characters and lone surrogates,
impossible secret names, format-suffix paths, odd ids and parameters, wrong
methods, foreign Host headers. (/v1: tests/openai_api/test_bad_input.py.)

Bodies are sent raw, so the server's own parser reads the ``\\u0000`` and
``\\ud800`` escapes."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.test import Client, override_settings

from chatforge.api.json_input import MAX_JSON_DEPTH

pytestmark = pytest.mark.django_db

DEEP = "[" * 60_000 + "]" * 60_000
NUL = '"a\\u0000b"'
SURROGATE = '"a\\ud800b"'


@pytest.fixture
def owner(make_user, idle_broker, settings):
    """A staff user allowed to run tools directly, with a conversation: every
    JSON endpoint reaches its parser for them."""
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
    messages = f"/api/conversations/{owner.conversation_id}/messages/"
    return [
        ("post", "/api/conversations/", '{"title": {v}}'),
        ("post", messages, '{"content": {v}}'),
        ("post", messages, '{"content": "hi", "model": {v}}'),
        ("post", messages, '{"content": "hi", "assistant": {v}}'),
        ("post", messages, '{"content": "hi", "tools": [{v}]}'),
        ("post", "/api/tools/test", '{"query": {v}}'),
        ("post", "/api/tools/test/", '{"query": "hi", "model": {v}}'),
        ("post", "/api/tools/echo/invoke", '{"arguments": {"text": {v}}}'),
        ("put", "/api/secrets/some_key/", '{"value": {v}}'),
    ]


def _send(client: Client, method: str, path: str, body: str):
    return getattr(client, method)(path, body, content_type="application/json")


def test_deeply_nested_json_is_a_400_on_every_json_endpoint(owner):
    for method, path, _ in _json_bodies(owner):
        response = _send(owner, method, path, DEEP)
        assert response.status_code == 400, (method, path, response.status_code, response.content[:200])
        error = response.json()["error"]
        assert error["code"] == "invalid_json", (method, path, error)
        assert f"nested deeper than {MAX_JSON_DEPTH} levels" in error["message"], (method, path)


def test_the_depth_limit_is_exact_and_brackets_inside_strings_do_not_count(owner):
    nested = "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1)
    brackets_as_text = '"' + "[{" * 40 + '"'  # 80 brackets: the scan runs, and skips them
    allowed = _send(owner, "post", "/api/conversations/", '{"title": ' + brackets_as_text + ', "x": ' + nested + "}")
    assert allowed.status_code == 201, allowed.content[:200]
    assert allowed.json()["title"] == "[{" * 40

    one_more = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    refused = _send(owner, "post", "/api/conversations/", '{"x": ' + one_more + "}")
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_json"


def test_malformed_json_is_the_same_invalid_json_error(owner):
    response = _send(owner, "post", "/api/conversations/", '{"title": ')
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"
    assert "not valid JSON" in response.json()["error"]["message"]


@pytest.mark.parametrize(("value", "says"), [
    (NUL, "contains a NUL character (\\u0000), which cannot be stored"),
    (SURROGATE, "contains an unpaired UTF-16 surrogate"),
])
def test_text_that_cannot_be_stored_is_a_400_naming_the_field(owner, value, says):
    for method, path, template in _json_bodies(owner):
        response = _send(owner, method, path, template.replace("{v}", value))
        assert response.status_code == 400, (method, path, response.status_code, response.content[:200])
        error = response.json()["error"]
        assert error["code"] == "invalid_json", (method, path, error)
        assert says in error["message"] and "$." in error["message"], (method, path, error["message"])
    # A key is text too.
    response = _send(owner, "post", "/api/conversations/", '{"a' + value[2:-2] + '": 1}')
    assert response.status_code == 400 and "(a key)" in response.json()["error"]["message"]


def test_a_form_encoded_nul_is_refused_too(owner):
    response = owner.post("/api/conversations/", "title=a%00b", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400
    assert "title" in response.json()["error"]["message"]


def test_secret_names_are_checked_before_they_reach_the_database(owner):
    for method in ("delete", "put"):
        response = getattr(owner, method)("/api/secrets/%ED%A0%80/", '{"value": "x"}',
                                          content_type="application/json")
        assert response.status_code == 400, (method, response.content[:200])
        assert "Invalid secret name" in response.json()["error"]["message"]
        # A NUL is refused for any URL before a view runs (chatforge/api/nul_guard.py).
        response = getattr(owner, method)("/api/secrets/%00/", '{"value": "x"}', content_type="application/json")
        assert response.status_code == 400, (method, response.content[:200])
        assert "NUL character" in response.json()["error"]["message"]
    assert owner.delete("/api/secrets/no_such_key/").status_code == 404


@pytest.mark.parametrize("path", [
    "/api/conversations.json", "/api/tools.json", "/api/conversations/{c}/messages.json",
    "/api/runs/00000000-0000-0000-0000-000000000000/cancel.json", "/api/conversations/{c}.json",
])
def test_format_suffix_paths_are_json_404s(owner, path):
    for method in ("get", "post"):
        response = getattr(owner, method)(path.replace("{c}", owner.conversation_id))
        assert response.status_code == 404, (method, path, response.status_code)
        assert response.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("path", [
    "/api/conversations/%00/", "/api/conversations/%00/messages/", "/api/runs/%00/", "/api/runs/%00/events/",
    "/api/conversations/%ED%A0%80/", "/api/tools/%00/invoke/", "/api/runs/%00/cancel/",
    "/api/conversations/?limit=%00", "/api/conversations/?offset=%00&limit=1", "/api/conversations/?source=%00",
    "/api/conversations/?source=%ED%A0%80", "/api/conversations/{c}/messages/?limit=%00",
    "/api/conversations/?limit=99999999999999999999", "/api/runs/00000000-0000-0000-0000-000000000000/events/?after=%00",
])
def test_odd_ids_and_parameters_are_client_errors(owner, path):
    method = "post" if "invoke" in path or "cancel" in path else "get"
    response = getattr(owner, method)(path.replace("{c}", owner.conversation_id))
    assert 200 <= response.status_code < 500, (path, response.status_code)
    assert response["Content-Type"].startswith("application/json")


@pytest.mark.parametrize(("method", "path"), [("post", "/healthz"), ("delete", "/readyz"), ("put", "/healthz")])
def test_wrong_methods_on_the_probes_are_json_405s_with_allow(method, path):
    # enforce_csrf_checks, as a browser's cookies would: the CSRF check used to answer first, in HTML.
    response = getattr(Client(enforce_csrf_checks=True), method)(path)
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "method_not_allowed"


@pytest.mark.parametrize("path", ["/api/conversations/", "/api", "/healthz", "/readyz"])
def test_a_foreign_host_header_is_a_json_400(path, caplog):
    with override_settings(ALLOWED_HOSTS=["chatforge.example"], DEBUG=False):
        response = Client(raise_request_exception=False).get(path, HTTP_HOST="evil.example",
                                                             HTTP_ACCEPT="text/html")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "bad_host" and "Host header" in error["message"]
    # Still logged where Django logs it, for operators watching for probes.
    assert any(record.name == "django.security.DisallowedHost" for record in caplog.records)
