"""Throttles, the active-run cap and size limits answer with clear JSON."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(make_user, idle_broker, settings):
    settings.CHATFORGE_MESSAGE_RATE = ""
    user, token = make_user()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return api


def conversation(client) -> str:
    return client.post("/api/conversations/", {}, format="json").json()["id"]


def test_posting_too_fast_answers_429_with_retry_after(client, settings):
    from django.core.cache import cache

    cache.clear()
    settings.CHATFORGE_MESSAGE_RATE = "2/min"
    for _ in range(2):
        assert client.post(f"/api/conversations/{conversation(client)}/messages/", {"content": "hi"},
                           format="json").status_code == 202
    response = client.post(f"/api/conversations/{conversation(client)}/messages/", {"content": "hi"}, format="json")
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert response.json()["error"]["code"] == "throttled"
    # Reading is never throttled.
    assert client.get("/api/conversations/").status_code == 200


def test_the_active_run_cap_answers_429(client, settings):
    settings.CHATFORGE_MAX_ACTIVE_RUNS_PER_USER = 2
    for _ in range(2):
        client.post(f"/api/conversations/{conversation(client)}/messages/", {"content": "hi"}, format="json")
    response = client.post(f"/api/conversations/{conversation(client)}/messages/", {"content": "hi"}, format="json")
    assert response.status_code == 429
    error = response.json()["error"]
    assert error["code"] == "too_many_active_runs" and error["details"] == {"active_runs": 2, "limit": 2}


def test_a_body_over_the_limit_answers_413(client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    response = client.post(f"/api/conversations/{conversation(client)}/messages/", {"content": "x" * 20_000},
                           format="json")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"


def test_too_many_tools_answers_400(client, settings):
    settings.CHATFORGE_MAX_TOOLS_PER_REQUEST = 2
    response = client.post(f"/api/conversations/{conversation(client)}/messages/",
                           {"content": "hi", "tools": ["echo", "calculator", "get_time"]}, format="json")
    assert response.status_code == 400 and "at most 2" in response.json()["error"]["message"]
