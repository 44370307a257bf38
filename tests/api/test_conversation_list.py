"""The conversation list (GET /api/conversations/): pinned first, then by
the last change; archived ones on their own (``?archived=1``) and found by a
search; pin and archive by PATCH, which leave ``updated_at`` alone."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from chatforge.conversations.models import Conversation, Message, Run
from tests.support.api_clients import api_client

pytestmark = pytest.mark.django_db


def _conversations(user, count: int) -> list[Conversation]:
    """``count`` conversations, the first the most recently changed."""
    now = timezone.now()
    made = [Conversation.objects.create(user=user, title=f"chat {i}") for i in range(count)]
    for i, conversation in enumerate(made):
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=now - timedelta(minutes=i))
    return made


def listed(client, **params) -> list[str]:
    answer = client.get("/api/conversations/", params)
    assert answer.status_code == 200, answer.content
    return [c["title"] for c in answer.json()["results"]]


def patch(client, conversation: Conversation, body: dict):
    return client.patch(f"/api/conversations/{conversation.id}/", body, format="json")


def test_pinned_first_newest_pin_first_then_by_last_change(client):
    _conversations(client.user, 5)
    assert listed(client) == ["chat 0", "chat 1", "chat 2", "chat 3", "chat 4"]
    for title in ("chat 3", "chat 1"):
        answer = patch(client, Conversation.objects.get(title=title), {"pinned": True})
        assert answer.status_code == 200, answer.content
        assert answer.json()["pinned_at"] is not None
    assert listed(client) == ["chat 1", "chat 3", "chat 0", "chat 2", "chat 4"]

    # Pinning again keeps the place; unpinning puts it back by its last change.
    assert patch(client, Conversation.objects.get(title="chat 3"), {"pinned": True}).status_code == 200
    assert listed(client)[:2] == ["chat 1", "chat 3"]
    answer = patch(client, Conversation.objects.get(title="chat 1"), {"pinned": False})
    assert answer.json()["pinned_at"] is None
    assert listed(client) == ["chat 3", "chat 0", "chat 1", "chat 2", "chat 4"]


def test_pin_and_archive_leave_the_last_change_alone_and_rename_still_works(client):
    conversation = _conversations(client.user, 1)[0]
    before = Conversation.objects.get(pk=conversation.pk).updated_at
    answer = patch(client, conversation, {"pinned": True, "archived": True})
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["pinned_at"] and body["archived_at"] and body["updated_at"] == before.isoformat().replace(
        "+00:00", "Z")
    assert "pinned" not in body and "archived" not in body  # write-only
    assert Conversation.objects.get(pk=conversation.pk).updated_at == before

    answer = patch(client, conversation, {"title": "Renamed", "archived": False})
    assert answer.status_code == 200
    stored = Conversation.objects.get(pk=conversation.pk)
    assert (stored.title, stored.archived_at, stored.pinned_at is not None) == ("Renamed", None, True)


def test_a_new_conversation_can_be_made_pinned(client):
    answer = client.post("/api/conversations/", {"title": "Pinned from the start", "pinned": True}, format="json")
    assert answer.status_code == 201, answer.content
    assert answer.json()["pinned_at"] is not None
    assert Conversation.objects.get(pk=answer.json()["id"]).pinned_at is not None


def test_archived_ones_are_listed_on_their_own_and_found_by_a_search(client):
    _conversations(client.user, 4)
    for title in ("chat 1", "chat 2"):
        assert patch(client, Conversation.objects.get(title=title), {"archived": True}).status_code == 200
    assert listed(client) == ["chat 0", "chat 3"]
    assert listed(client, archived="1") == ["chat 1", "chat 2"]
    assert listed(client, archived="0") == ["chat 0", "chat 3"]

    found = client.get("/api/conversations/", {"q": "chat"}).json()["results"]
    assert [(c["title"], c["archived_at"] is not None) for c in found] == [
        ("chat 0", False), ("chat 1", True), ("chat 2", True), ("chat 3", False)]

    # Restore: back in the list, where its last change puts it.
    assert patch(client, Conversation.objects.get(title="chat 1"), {"archived": False}).status_code == 200
    assert listed(client) == ["chat 0", "chat 1", "chat 3"]


def test_a_conversation_with_a_running_answer_can_be_archived(client):
    conversation = Conversation.objects.create(user=client.user, title="Busy")
    question = Message.objects.create(conversation=conversation, role="user", content="Still thinking?")
    run = Run.objects.create(conversation=conversation, user=client.user, user_message=question, model="demo",
                             status=Run.Status.RUNNING)
    assert patch(client, conversation, {"archived": True}).status_code == 200
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING and not run.cancel_requested


def test_paging_keeps_the_order(client):
    _conversations(client.user, 7)
    patch(client, Conversation.objects.get(title="chat 6"), {"pinned": True})
    first = client.get("/api/conversations/", {"limit": 3}).json()
    second = client.get("/api/conversations/", {"limit": 3, "offset": 3}).json()
    third = client.get("/api/conversations/", {"limit": 3, "offset": 6}).json()
    titles = [c["title"] for page in (first, second, third) for c in page["results"]]
    assert titles == ["chat 6", "chat 0", "chat 1", "chat 2", "chat 3", "chat 4", "chat 5"]
    assert first["count"] == 7 and first["next"] and third["next"] is None


def test_bad_input_is_explained(client, make_user):
    conversation = _conversations(client.user, 1)[0]
    answer = client.get("/api/conversations/", {"archived": "maybe"})
    assert answer.status_code == 400 and "archived" in answer.json()["error"]["message"]
    answer = patch(client, conversation, {"pinned": "sometimes"})
    assert answer.status_code == 400 and "pinned" in answer.json()["error"]["message"]

    stranger = api_client(*make_user())
    assert patch(stranger, conversation, {"pinned": True}).status_code == 404
    assert patch(stranger, conversation, {"archived": True}).status_code == 404
    assert Conversation.objects.get(pk=conversation.pk).pinned_at is None
    assert listed(stranger) == [] and listed(stranger, archived="1") == []
