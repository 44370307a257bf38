"""Renaming a conversation (``PATCH``) and finding conversations by title or
content (``?q=``), always within the user's own."""

from __future__ import annotations

import pytest
from django.test import Client

from chatforge.conversations.models import Conversation, Message

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(make_user):
    user, token = make_user()
    return user, Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def test_rename(owner, make_user):
    user, client = owner
    conversation = Conversation.objects.create(user=user, title="Untitled idea")
    answer = client.patch(f"/api/conversations/{conversation.id}/", {"title": "  Trip to Porto "},
                          content_type="application/json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["title"] == "Trip to Porto"
    conversation.refresh_from_db()
    assert conversation.title == "Trip to Porto"
    # Without the slash too, and only the title is writable.
    answer = client.patch(f"/api/conversations/{conversation.id}", {"title": "Porto", "source": "openai"},
                          content_type="application/json")
    assert answer.status_code == 200 and answer.json()["source"] == "chat"

    too_long = client.patch(f"/api/conversations/{conversation.id}/", {"title": "x" * 201},
                            content_type="application/json")
    assert too_long.status_code == 400 and "200" in too_long.content.decode()
    _, other_token = make_user()
    stranger = Client(HTTP_AUTHORIZATION=f"Bearer {other_token}").patch(
        f"/api/conversations/{conversation.id}/", {"title": "mine now"}, content_type="application/json")
    assert stranger.status_code == 404
    conversation.refresh_from_db()
    assert conversation.title == "Porto"


def test_search_by_title_and_content(owner, make_user):
    user, client = owner
    porto = Conversation.objects.create(user=user, title="Trip to Porto")
    pasta = Conversation.objects.create(user=user, title="Dinner")
    Message.objects.create(conversation=pasta, role="user", content="A recipe for carbonara, please")
    Message.objects.create(conversation=pasta, role="assistant", content="Carbonara needs guanciale.")
    Conversation.objects.create(user=user, title="Unrelated")
    other, _ = make_user()
    Conversation.objects.create(user=other, title="Porto, but someone else's")

    def found(query: str) -> list[str]:
        answer = client.get("/api/conversations/", {"q": query})
        assert answer.status_code == 200, answer.content
        return [c["id"] for c in answer.json()["results"]]

    assert found("porto") == [str(porto.id)]
    assert found("CARBONARA") == [str(pasta.id)]  # two matching messages, listed once
    assert sorted(found("")) == sorted(str(c.id) for c in Conversation.objects.filter(user=user))
    assert found("nothing like this") == []
    assert client.get("/api/conversations/", {"q": "porto", "source": "openai"}).json()["results"] == []
