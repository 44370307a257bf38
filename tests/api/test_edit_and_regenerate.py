"""Editing a user message the older way, with ``replace_from``: the new
message becomes a sibling of the replaced one (it gets that message's
parent) and nothing is deleted; the current branch follows the new message
(decision 0037). Runs here are only enqueued (no worker): they are ended by
hand where a test needs it. The tree's own API: test_message_tree_api.py."""

from __future__ import annotations

import pytest
from django.test import Client

from chatforge.conversations.models import Conversation, LlmTurn, Message, Run
from chatforge.conversations.selectors import messages_of

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
        Message.objects.create(conversation_id=conversation, run=run, role="assistant", content=f"re: {content}",
                               parent_id=run.user_message_id)
        Run.objects.filter(pk=run.pk).update(status="completed")
        return run.user_message

    return conversation, send, answered


def texts(conversation: str) -> list[str]:
    return [m.content for m in Conversation.objects.get(pk=conversation).messages.order_by("created_at")]


def branch(conversation: str) -> list[str]:
    return [m.content for m in messages_of(Conversation.objects.get(pk=conversation))]


def test_editing_a_message_adds_a_sibling_and_keeps_everything(chat):
    conversation, send, answered = chat
    answered("first")
    second = answered("second")
    answered("third")
    edited = send("second, edited", replace_from=str(second.pk))
    assert edited.status_code == 202, edited.content
    new = Message.objects.get(pk=edited.json()["message_id"])
    assert new.parent_id == second.parent_id
    assert branch(conversation) == ["first", "re: first", "second, edited"]
    assert texts(conversation) == ["first", "re: first", "second", "re: second", "third", "re: third",
                                   "second, edited"]
    assert Run.objects.filter(conversation_id=conversation).count() == 4
    assert LlmTurn.objects.filter(run__conversation_id=conversation).count() == 4


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
