"""A request that fails because Redis, Postgres or the broker is unreachable
is answered 503 ``service_unavailable`` with Retry-After, in the error shape
of its API, wherever it failed: in a DRF view, in a plain (async) view, or
in a middleware. Any other failure stays a 500.

The outage here is real: the cache that counts the message rate points at a
port where no Redis listens. A database outage end to end is in
``tests/integration/test_database_outage.py``.
"""

from __future__ import annotations

import pytest
import redis
from django.test import Client
from rest_framework.test import APIClient

from chatforge.api.errors import RETRY_AFTER_S
from chatforge.conversations.models import Message, Run
from tests.support.stack import free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def user_and_token(make_user, idle_broker):
    return make_user()


@pytest.fixture
def rate_cache_down(settings):
    settings.CHATFORGE_MESSAGE_RATE = "30/min"
    settings.CACHES = {"default": {"BACKEND": "chatforge.db.redis_cache.ReusingRedisCache",
                                   "LOCATION": f"redis://127.0.0.1:{free_port()}/0"}}


def assert_unavailable(response) -> dict:
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == str(RETRY_AFTER_S)
    assert response["Content-Type"] == "application/json"
    return response.json()["error"]


def test_a_drf_view_answers_503_and_stores_nothing(user_and_token, settings):
    user, token = user_and_token
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    conversation_id = api.post("/api/conversations/", {}, format="json").json()["id"]

    settings.CHATFORGE_MESSAGE_RATE = "30/min"
    settings.CACHES = {"default": {"BACKEND": "chatforge.db.redis_cache.ReusingRedisCache",
                                   "LOCATION": f"redis://127.0.0.1:{free_port()}/0"}}
    response = api.post(f"/api/conversations/{conversation_id}/messages/", {"content": "hi"}, format="json")

    error = assert_unavailable(response)
    assert error["code"] == "service_unavailable"
    assert error["message"]
    assert error["details"] == {"retry_after_s": RETRY_AFTER_S}
    assert not Run.objects.filter(user=user).exists()
    assert not Message.objects.filter(conversation_id=conversation_id).exists()


def test_the_openai_endpoint_answers_503_in_openai_shape(user_and_token, rate_cache_down):
    _, token = user_and_token
    chat = {"model": "demo", "messages": [{"role": "user", "content": "hi"}]}
    response = Client().post("/v1/chat/completions", chat, content_type="application/json",
                             HTTP_AUTHORIZATION=f"Bearer {token}")
    error = assert_unavailable(response)
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == "service_unavailable"
    assert error["type"] == "server_error"
    assert not Run.objects.exists()


class FailingMiddleware:
    """Raises what its request's header names, before any view runs."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        match request.headers.get("X-Fail"):
            case "redis":
                redis.Redis(port=free_port(), socket_connect_timeout=1).ping()
            case "bug":
                raise ValueError("a bug in a middleware")
        return self.get_response(request)


@pytest.fixture
def failing_middleware(settings):
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "tests.api.test_service_unavailable.FailingMiddleware"]
    return Client(raise_request_exception=False)


def test_an_outage_raised_by_a_middleware_answers_503(failing_middleware):
    error = assert_unavailable(failing_middleware.get("/api/conversations/", HTTP_X_FAIL="redis"))
    assert error["code"] == "service_unavailable"
    openai_error = assert_unavailable(failing_middleware.get("/v1/models", HTTP_X_FAIL="redis"))
    assert openai_error["code"] == "service_unavailable" and openai_error["type"] == "server_error"


def test_other_failures_stay_500(failing_middleware):
    response = failing_middleware.get("/api/conversations/", HTTP_X_FAIL="bug")
    assert response.status_code == 500
    assert "Retry-After" not in response
    assert response.json()["error"]["code"] == "server_error"
