"""Idempotency-Key on POST …/messages/ and /v1/chat/completions: a repeated
request gets the first request's run back and creates nothing."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from chatforge.conversations.models import Conversation, Message, Run
from chatforge.openai_api.services import chat_start
from chatforge.openai_api.translate import parse_chat_request


@pytest.fixture
def client_and_user(make_user, idle_broker, settings):
    settings.CHATFORGE_MESSAGE_RATE = ""
    user, token = make_user()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return api, user


def post(client, conversation_id: str, content: str, key: str | None):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return client.post(f"/api/conversations/{conversation_id}/messages/", {"content": content},
                       format="json", **headers)


@pytest.mark.django_db
def test_a_repeated_post_returns_the_first_run(client_and_user, idle_broker, django_capture_on_commit_callbacks):
    client, user = client_and_user
    conversation_id = client.post("/api/conversations/", {}, format="json").json()["id"]

    with django_capture_on_commit_callbacks(execute=True):
        first = post(client, conversation_id, "What is 2+2?", "key-1")
    with django_capture_on_commit_callbacks(execute=True):
        again = post(client, conversation_id, "What is 2+2?", "key-1")

    assert first.status_code == again.status_code == 202
    assert again.json() == first.json()
    assert "Idempotent-Replayed" not in first
    assert again["Idempotent-Replayed"] == "true"
    assert Run.objects.filter(user=user).count() == 1
    assert Message.objects.filter(conversation_id=conversation_id, role="user").count() == 1
    assert idle_broker.llen("llm") == 1  # the first turn was enqueued once


@pytest.mark.django_db
def test_keys_are_per_user_and_absent_keys_never_match(client_and_user, make_user):
    client, user = client_and_user
    conversation_id = client.post("/api/conversations/", {}, format="json").json()["id"]
    assert post(client, conversation_id, "one", None).status_code == 202
    conversation_id = client.post("/api/conversations/", {}, format="json").json()["id"]
    assert post(client, conversation_id, "one", None).status_code == 202
    assert Run.objects.filter(user=user).count() == 2

    other, token = make_user()
    other_client = APIClient()
    other_client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    mine = post(client, client.post("/api/conversations/", {}, format="json").json()["id"], "same", "shared")
    theirs = post(other_client, other_client.post("/api/conversations/", {}, format="json").json()["id"],
                  "same", "shared")
    assert mine.json()["run_id"] != theirs.json()["run_id"]


@pytest.mark.django_db
def test_the_same_key_for_another_message_is_refused(client_and_user):
    client, _ = client_and_user
    conversation_id = client.post("/api/conversations/", {}, format="json").json()["id"]
    first = post(client, conversation_id, "first message", "key-2")

    response = post(client, conversation_id, "a different message", "key-2")

    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "idempotency_key_reused"
    assert "different message" in error["message"]
    assert error["details"]["run_id"] == first.json()["run_id"]


@pytest.mark.django_db
def test_an_unusable_key_is_a_clear_400(client_and_user):
    client, user = client_and_user
    conversation_id = client.post("/api/conversations/", {}, format="json").json()["id"]
    response = post(client, conversation_id, "hi", "k" * 256)
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()["error"]["message"]
    assert not Run.objects.filter(user=user).exists()


@pytest.mark.django_db(transaction=True)
def test_two_repeats_at_the_same_moment_start_one_run(make_user, idle_broker):
    """The unique constraint settles a race the first look-up cannot see."""
    user, _ = make_user()
    conversation = Conversation.objects.create(user=user)
    request = parse_chat_request({"model": "demo", "messages": [{"role": "user", "content": "race"}],
                                  "conversation_id": str(conversation.id)})
    barrier = threading.Barrier(4)
    runs: list[Run] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            barrier.wait()
            runs.append(chat_start(user=user, request=request, idempotency_key="race-key"))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert not errors, errors
    assert len({run.id for run in runs}) == 1
    assert sum(not run.replayed for run in runs) == 1
    assert Run.objects.filter(user=user).count() == 1
    assert Message.objects.filter(conversation=conversation, role="user").count() == 1


@pytest.mark.django_db
def test_v1_repeat_with_a_new_conversation_creates_nothing(make_user, idle_broker):
    user, _ = make_user()
    body = {"model": "demo", "messages": [{"role": "system", "content": "Be brief."},
                                          {"role": "user", "content": "hello"}]}
    first = chat_start(user=user, request=parse_chat_request(body), idempotency_key="v1-key")
    again = chat_start(user=user, request=parse_chat_request(body), idempotency_key="v1-key")

    assert again.id == first.id and again.replayed and not first.replayed
    assert Conversation.objects.filter(user=user).count() == 1
    assert Run.objects.filter(user=user).count() == 1


@pytest.mark.django_db
def test_the_schema_documents_the_header_on_both_operations(client_and_user):
    client, _ = client_and_user
    paths = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()["paths"]
    for operation in (paths["/api/conversations/{id}/messages/"]["post"], paths["/v1/chat/completions"]["post"]):
        headers = {p["name"] for p in operation.get("parameters", []) if p["in"] == "header"}
        assert "Idempotency-Key" in headers
        assert "422" in operation["responses"]
