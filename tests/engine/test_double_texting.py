"""A message posted while the conversation's run is still active:
reject (409), enqueue (starts after it) or interrupt (cancels it, then starts)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from chatforge.conversations.models import Conversation, Message, Run
from chatforge.conversations.selectors import messages_of
from orchestration import tasks
from orchestration.services.runs import OnActive, RunOptions, run_start
from tests.engine.test_redelivery import enqueued
from tests.fakes.openai_server import Reply, last_user_text

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def chat(settings, fake_llm, idle_broker, make_user):
    settings.OPENAI_BASE_URL = fake_llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    fake_llm.add_script("parrot", lambda body: Reply(text=f"Answer to: {last_user_text(body)}"))
    user, token = make_user()
    return user, token, idle_broker, Conversation.objects.create(user=user)


def post(user, conversation, content, on_active=OnActive.REJECT) -> Run:
    return run_start(user=user, conversation=conversation, content=content, options=RunOptions(model="parrot"),
                     on_active=on_active)


def test_reject_is_the_default_and_answers_409(chat):
    user, token, broker, conversation = chat
    first = post(user, conversation, "one")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = client.post(f"/api/conversations/{conversation.id}/messages/", {"content": "two"}, format="json")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "run_active" and error["details"]["active_run_id"] == str(first.id)
    assert "on_active=enqueue" in error["message"]
    assert Message.objects.filter(conversation=conversation).count() == 1  # nothing stored


def test_enqueue_starts_after_the_active_run_and_sees_its_answer(chat, fake_llm):
    user, _, broker, conversation = chat
    first = post(user, conversation, "one")
    second = post(user, conversation, "two", OnActive.ENQUEUE)
    assert second.blocked_by_id == first.id
    assert enqueued(broker) == [("chatforge.llm_turn", [str(first.id), 0])]  # only the first is dispatched

    tasks.llm_turn(str(second.id), 0)  # delivered early: it keeps waiting
    assert Run.objects.get(pk=second.pk).status == "queued"
    tasks.llm_turn(str(first.id), 0)  # the first completes, and dispatches the second
    assert ("chatforge.llm_turn", [str(second.id), 0]) in enqueued(broker)
    tasks.llm_turn(str(second.id), 0)

    assert Run.objects.get(pk=second.pk).status == "completed"
    sent = fake_llm.requests_for("parrot")[-1]["messages"]
    assert [(m["role"], m["content"]) for m in sent] == [
        ("user", "one"), ("assistant", "Answer to: one"), ("user", "two")]
    # The stored conversation reads in the same order.
    assert [(m.role, m.content) for m in messages_of(conversation)] == [
        ("user", "one"), ("assistant", "Answer to: one"), ("user", "two"), ("assistant", "Answer to: two")]


def test_interrupt_cancels_the_active_run_then_starts(chat):
    user, _, broker, conversation = chat
    first = post(user, conversation, "one")
    second = post(user, conversation, "never mind, two", OnActive.INTERRUPT)

    first.refresh_from_db()
    assert first.status == "cancelled"
    assert Message.objects.get(run=first, role="assistant").status == "cancelled"
    assert ("chatforge.llm_turn", [str(second.id), 0]) in enqueued(broker)
    tasks.llm_turn(str(second.id), 0)
    assert Run.objects.get(pk=second.pk).status == "completed"
