"""Every response names its request (X-Request-ID: the client's if plain,
else a new one), and the request's log lines carry it and the user."""

from __future__ import annotations

import logging

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_a_plain_request_id_is_kept_and_anything_else_replaced(client):
    assert client.get("/healthz", HTTP_X_REQUEST_ID="abc-123").headers["X-Request-ID"] == "abc-123"
    replaced = client.get("/healthz", HTTP_X_REQUEST_ID="bad id\nwith newline").headers["X-Request-ID"]
    assert len(replaced) == 32 and replaced.isalnum()
    assert client.get("/healthz").headers["X-Request-ID"] != client.get("/healthz").headers["X-Request-ID"]


def test_a_token_users_request_logs_carry_the_request_and_the_user(make_user, idle_broker, settings, caplog):
    from structlog.contextvars import get_contextvars

    settings.CHATFORGE_MESSAGE_RATE = ""
    user, token = make_user()
    api = Client(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_X_REQUEST_ID="req-42")
    seen: list[dict] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage() == "run accepted":
                seen.append(dict(get_contextvars()))

    handler = Capture()
    logging.getLogger("orchestration.services.runs").addHandler(handler)
    try:
        conversation = api.post("/api/conversations/", {}, content_type="application/json").json()["id"]
        accepted = api.post(f"/api/conversations/{conversation}/messages/", {"content": "hi", "model": "demo"},
                            content_type="application/json").json()
    finally:
        logging.getLogger("orchestration.services.runs").removeHandler(handler)
    assert seen == [{"request_id": "req-42", "user_id": user.id, "run_id": accepted["run_id"],
                     "conversation_id": conversation}]
