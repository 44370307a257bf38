"""Editing a user message and regenerating the last answer: both send a
message with ``replace_from``; the replaced message and everything after it
go (with their runs), and the new run answers the new text. Runs here are
only enqueued (no worker): they are ended by hand where a test needs it."""

from __future__ import annotations

import pytest
from django.test import Client

from chatforge.conversations.models import Conversation, LlmTurn, Message, Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def chat(make_user, idle_broker, settings):
    settings.CHATFORGE_MESSAGE_RATE = ""
    user, token = make_user()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    conversation = client.post("/api/conversations/", {}, content_type="application/json").json()["id"]

    def send(content: str, **extra):
        return client.post(f"/api/conversations/{conversation}/messages/", {"content": content, "model": "demo",
                                                                             **extra},
                           content_type="application/json")

    def answered(content: str) -> Message:
        """Send, then end the run with an answer (as a worker would)."""
        run = Run.objects.get(pk=send(content).json()["run_id"])
        Message.objects.create(conversation_id=conversation, run=run, role="assistant", content=f"re: {content}")
        Run.objects.filter(pk=run.pk).update(status="completed")
        return run.user_message

    return conversation, send, answered


def texts(conversation: str) -> list[str]:
    return [m.content for m in Conversation.objects.get(pk=conversation).messages.order_by("created_at")]


def test_editing_a_message_drops_it_and_everything_after(chat):
    conversation, send, answered = chat
    answered("first")
    second = answered("second")
    answered("third")
    edited = send("second, edited", replace_from=str(second.pk))
    assert edited.status_code == 202, edited.content
    assert texts(conversation) == ["first", "re: first", "second, edited"]
    assert Run.objects.filter(conversation_id=conversation).count() == 2  # first's, and the new one
    assert LlmTurn.objects.filter(run__conversation_id=conversation).count() == 2


def test_regenerating_the_last_answer(chat):
    conversation, send, answered = chat
    answered("first")
    last = answered("what is 2+2?")
    again = send("what is 2+2?", replace_from=str(last.pk))
    assert again.status_code == 202, again.content
    assert texts(conversation) == ["first", "re: first", "what is 2+2?"]


def test_what_cannot_be_replaced(chat, make_user):
    conversation, send, answered = chat
    first = answered("first")
    reply = Message.objects.get(conversation_id=conversation, role="assistant")
    not_a_user_message = send("x", replace_from=str(reply.pk))
    assert not_a_user_message.status_code == 400 and "replace_from" in not_a_user_message.content.decode()
    unknown = send("x", replace_from="00000000-0000-0000-0000-000000000000")
    assert unknown.status_code == 400
    send("running")  # a run in progress (no worker ends it)
    busy = send("edit", replace_from=str(first.pk))
    assert busy.status_code == 409 and "editing or regenerating" in busy.content.decode()
    assert texts(conversation) == ["first", "re: first", "running"]
