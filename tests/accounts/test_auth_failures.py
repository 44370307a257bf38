"""Failed sign-ins and bad API tokens are throttled per client address,
with 429 + Retry-After, the same answer whatever name or token was tried."""

from __future__ import annotations

import itertools
import re
import secrets

import pytest
from django.test import Client, override_settings
from django.urls import reverse

pytestmark = [pytest.mark.django_db]

LIMIT = 3
# Documentation addresses, random per session: the counts outlive a test run.
_addresses = (f"2001:db8:{secrets.token_hex(2)}::{n:x}" for n in itertools.count(1))


@pytest.fixture
def address() -> str:
    """A client address of this test alone: the counts live in the shared cache."""
    return next(_addresses)


@pytest.fixture(autouse=True)
def small_limit():
    with override_settings(CHATFORGE_AUTH_FAILURE_LIMIT=LIMIT, CHATFORGE_AUTH_FAILURE_WINDOW_S=600):
        yield


def _api_get(client: Client, token: str, address: str):
    return client.get("/api/conversations/", HTTP_AUTHORIZATION=f"Bearer {token}", REMOTE_ADDR=address)


def test_bad_tokens_are_answered_429_with_retry_after_once_over_the_limit(make_user, address):
    client = Client()
    for attempt in range(LIMIT):
        response = _api_get(client, f"cf_wrong{attempt}", address)
        assert response.status_code == 401, response.content
    response = _api_get(client, "cf_wrong-again", address)
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "throttled"
    assert response.json()["error"]["message"].startswith("Too many failed sign-in or token attempts")
    assert 0 < int(response["Retry-After"]) <= 600
    # Another address is not affected.
    assert _api_get(client, "cf_wrong", next(_addresses)).status_code == 401


def test_a_valid_token_is_served_while_its_address_is_throttled(make_user, address):
    """A token is 256 random bits: throttling exists to stop floods of bad
    ones, and a request with a good token pays no extra cache round trip."""
    _, token = make_user()
    client = Client()
    for attempt in range(LIMIT + 1):
        _api_get(client, f"cf_wrong{attempt}", address)
    assert _api_get(client, token, address).status_code == 200


@pytest.mark.parametrize("login_url", ["login", "admin:login"])
def test_sign_in_is_refused_after_failures_even_with_the_right_password(django_user_model, address, login_url):
    django_user_model.objects.create_user(username="alice", password="right-password", is_staff=True)
    client = Client()
    url = reverse(login_url)
    for _ in range(LIMIT):
        response = client.post(url, {"username": "alice", "password": "wrong"}, REMOTE_ADDR=address)
        assert response.status_code == 200  # the form, with its error
        assert "_auth_user_id" not in client.session
    response = client.post(url, {"username": "alice", "password": "right-password"}, REMOTE_ADDR=address)
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 600
    assert b"Too many failed sign-in" in response.content
    assert "_auth_user_id" not in client.session
    # The same person from another address signs in.
    response = client.post(url, {"username": "alice", "password": "right-password"}, REMOTE_ADDR=next(_addresses))
    assert response.status_code == 302
    assert "_auth_user_id" in client.session


def test_known_and_unknown_user_names_are_answered_alike(django_user_model):
    """No user enumeration: a wrong password for a real account and any
    password for a name that does not exist give the same status and page,
    before and after the limit."""
    django_user_model.objects.create_user(username="alice", password="right-password")
    answers = {}
    for username in ("alice", "nobody-by-this-name"):
        address = next(_addresses)
        client = Client()
        statuses = []
        for _ in range(LIMIT + 1):
            response = client.post(reverse("login"), {"username": username, "password": "wrong"}, REMOTE_ADDR=address)
            body = response.content.decode().replace(username, "NAME")
            statuses.append((response.status_code, _without_csrf(body)))
        answers[username] = statuses
    assert [s for s, _ in answers["alice"]] == [200] * LIMIT + [429]
    assert answers["alice"] == answers["nobody-by-this-name"]


def _without_csrf(body: str) -> str:
    """The page without its per-request CSRF values and the seconds to wait."""
    body = re.sub(r'(csrfmiddlewaretoken" value="|name="csrf-token" content=")[^"]*', r"\1", body)
    return re.sub(r"wait \d+ s", "wait N s", body)
