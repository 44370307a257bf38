"""/v1 answers every bad input in OpenAI's error shape, never a 500 or
Django's HTML: deep JSON, NUL characters and lone surrogates in each field,
wrong methods (which met the CSRF check first), foreign Host headers, either
trailing-slash spelling, unknown paths, and floods of bad tokens (429)."""

from __future__ import annotations

import itertools
import secrets

import pytest
from django.test import Client, override_settings

from chatforge.api.json_input import MAX_JSON_DEPTH

pytestmark = pytest.mark.django_db

DEEP = "[" * 60_000 + "]" * 60_000
NUL = '"a\\u0000b"'
SURROGATE = '"a\\ud800b"'
# A chat request with {v} where the bad value goes, for each field that reached the database.
FIELDS = {
    "model": '{"model": {v}, "messages": [{"role": "user", "content": "hi"}]}',
    "assistant": '{"model": "demo", "assistant": {v}, "messages": [{"role": "user", "content": "hi"}]}',
    "content": '{"model": "demo", "messages": [{"role": "user", "content": {v}}]}',
    "system content": '{"model": "demo", "messages": [{"role": "system", "content": {v}}, '
                      '{"role": "user", "content": "hi"}]}',
    "key": '{"model": "demo", "messages": [{"role": "user", "content": "hi", {v}: 1}]}',
}
# Documentation addresses, random per session: the failure counts outlive a test run.
_addresses = (f"2001:db8:{secrets.token_hex(2)}::{n:x}" for n in itertools.count(1))


@pytest.fixture
def client(make_user, idle_broker, settings) -> Client:
    settings.CHATFORGE_MESSAGE_RATE = ""
    _, token = make_user()
    return Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {token}")


def _assert_openai_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert error["code"] == code, error
    return error


def test_deeply_nested_json_is_a_400(client):
    response = client.post("/v1/chat/completions", DEEP, content_type="application/json")
    error = _assert_openai_error(response, 400, "invalid_json")
    assert error["type"] == "invalid_request_error"
    assert f"nested deeper than {MAX_JSON_DEPTH} levels" in error["message"]


@pytest.mark.parametrize("field", list(FIELDS))
@pytest.mark.parametrize(("value", "says"), [
    (NUL, "contains a NUL character (\\u0000), which cannot be stored"),
    (SURROGATE, "contains an unpaired UTF-16 surrogate"),
])
def test_text_that_cannot_be_stored_is_a_400_naming_where(client, field, value, says):
    body = FIELDS[field].replace("{v}", value)
    for stream in ("", ', "stream": true'):
        response = client.post("/v1/chat/completions", body[:-1] + stream + "}", content_type="application/json")
        error = _assert_openai_error(response, 400, "invalid_json")
        assert says in error["message"] and "$." in error["message"], error["message"]


@pytest.mark.parametrize(("method", "path", "allowed"), [
    ("post", "/v1/models", "GET"), ("delete", "/v1/models/demo", "GET"), ("put", "/v1/models/", "GET"),
    ("get", "/v1/chat/completions", "POST"), ("delete", "/v1/chat/completions/", "POST"),
])
def test_wrong_methods_are_json_405s_with_allow(make_user, method, path, allowed):
    """With a signed-in browser session and CSRF enforced, as a browser would
    send: the CSRF check used to answer first, with Django's HTML page."""
    user, _ = make_user()
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    response = getattr(browser, method)(path)
    _assert_openai_error(response, 405, "method_not_allowed")
    assert response["Allow"] == allowed


def test_a_cookie_session_without_csrf_token_gets_openai_errors_not_the_csrf_page(make_user):
    user, _ = make_user()
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    response = browser.post("/v1/chat/completions", '{"model": "demo", "messages": []}',
                            content_type="application/json")
    _assert_openai_error(response, 401, "invalid_api_key")


@pytest.mark.parametrize("path", ["/v1/models", "/v1/chat/completions"])
def test_a_foreign_host_header_is_an_openai_400(path):
    with override_settings(ALLOWED_HOSTS=["chatforge.example"], DEBUG=False):
        response = Client(raise_request_exception=False).post(path, "{}", content_type="application/json",
                                                              HTTP_HOST="evil.example")
    error = _assert_openai_error(response, 400, "bad_host")
    assert "Host header" in error["message"]


def test_both_trailing_slash_spellings_reach_the_same_view(client):
    for path in ("/v1/models", "/v1/models/"):
        response = client.get(path)
        assert response.status_code == 200 and response.json()["object"] == "list", path
    for path in ("/v1/models/demo", "/v1/models/demo/"):
        assert client.get(path).json()["id"] == "demo", path
    for path in ("/v1/chat/completions", "/v1/chat/completions/"):
        # The body arrives (a redirect would have dropped it): its error names the field.
        response = client.post(path, '{"model": "demo", "messages": "hi"}', content_type="application/json")
        assert response.status_code == 400 and response.json()["error"]["param"] == "messages", path


def test_an_unknown_v1_path_is_an_openai_404(client):
    response = client.post("/v1/completions", "{}", content_type="application/json")
    error = _assert_openai_error(response, 404, "not_found")
    assert "/v1/completions" in error["message"]


@override_settings(CHATFORGE_AUTH_FAILURE_LIMIT=3, CHATFORGE_AUTH_FAILURE_WINDOW_S=600)
def test_bad_tokens_are_throttled_with_429_and_retry_after(make_user):
    address = next(_addresses)
    client = Client()
    for attempt in range(3):
        response = client.get("/v1/models", HTTP_AUTHORIZATION=f"Bearer cf_bad{attempt}", REMOTE_ADDR=address)
        _assert_openai_error(response, 401, "invalid_api_key")
    for method, path in (("get", "/v1/models"), ("post", "/v1/chat/completions"), ("get", "/v1/models/demo")):
        response = getattr(client, method)(path, HTTP_AUTHORIZATION="Bearer cf_bad", REMOTE_ADDR=address)
        error = _assert_openai_error(response, 429, "throttled")
        assert error["type"] == "rate_limit_exceeded"
        assert error["message"].startswith("Too many failed sign-in or token attempts")
        assert 0 < int(response["Retry-After"]) <= 600
    # A valid token is still served; another address is not throttled.
    _, token = make_user()
    assert client.get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {token}", REMOTE_ADDR=address).status_code == 200
    other = client.get("/v1/models", HTTP_AUTHORIZATION="Bearer cf_bad", REMOTE_ADDR=next(_addresses))
    assert other.status_code == 401


@pytest.mark.parametrize(("status", "type_"), [(403, "invalid_request_error"), (422, "invalid_request_error"),
                                                (429, "rate_limit_exceeded"), (503, "server_error")])
def test_every_client_error_is_typed_as_the_requests_fault(status, type_):
    """A 403 (failed CSRF check) and a 422 (an Idempotency-Key reused) were typed server_error."""
    from chatforge.api.openai_errors import OpenAIError

    assert OpenAIError("x", status=status).body()["error"]["type"] == type_
