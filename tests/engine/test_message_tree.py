"""Messages as a tree (decision 0037), in the engine: where a new message
goes, what a run's model is given (the path to its user message, never
another branch), finalize's parent for the answer and for messages
double-texted meanwhile, and the backfill that made every older
conversation one branch. Runs are run here by calling the tasks in this
process against the fake model server; the HTTP face: tests/api/test_message_tree_api.py."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from django.apps import apps
from django.utils import timezone

from chatforge.conversations.models import Conversation, Message, Run
from chatforge.conversations.selectors import message_tree_of, messages_of
from orchestration import tasks
from orchestration.services.branches import regenerate, switch_branch
from orchestration.services.runs import OnActive, RunOptions, run_start
from tests.fakes.openai_server import Reply, last_user_text

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def chat(settings, fake_llm, idle_broker, make_user):
    settings.OPENAI_BASE_URL = fake_llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    answers: dict[str, int] = {}

    def parrot(body):
        text = last_user_text(body)
        answers[text] = answers.get(text, 0) + 1
        return Reply(text=f"Answer {answers[text]} to: {text}")

    fake_llm.add_script("tree-parrot", parrot)
    user, _ = make_user()
    return user, Conversation.objects.create(user=user), fake_llm


def ask(user, conversation, content, **extra) -> Run:
    run = run_start(user=user, conversation=conversation, content=content, options=RunOptions(model="tree-parrot"),
                    **extra)
    conversation.refresh_from_db()
    return run


def answered(user, conversation, content, **extra) -> Run:
    run = ask(user, conversation, content, **extra)
    tasks.llm_turn(str(run.id), 0)
    assert Run.objects.get(pk=run.pk).status == "completed"
    conversation.refresh_from_db()
    return run


def answer_of(run: Run) -> Message:
    return Message.objects.get(run=run, role="assistant")


def branch(conversation: Conversation) -> list[str]:
    conversation.refresh_from_db()
    return [m.content for m in messages_of(conversation)]


def sent_history(fake_llm) -> list[tuple[str, str]]:
    """(role, text) of what the model was last sent, system prompt left out."""
    return [(m["role"], m["content"]) for m in fake_llm.requests_for("tree-parrot")[-1]["messages"]
            if m["role"] != "system"]


def test_messages_chain_and_the_answer_follows_its_question(chat):
    user, conversation, _ = chat
    first = answered(user, conversation, "one")
    second = answered(user, conversation, "two")
    assert first.user_message.parent_id is None
    assert answer_of(first).parent_id == first.user_message_id
    assert Message.objects.get(pk=second.user_message_id).parent_id == answer_of(first).pk
    assert answer_of(second).parent_id == second.user_message_id
    # Finalize never moves the leaf: it is the message the person sent.
    assert conversation.current_leaf == second.user_message_id
    assert branch(conversation) == ["one", "Answer 1 to: one", "two", "Answer 1 to: two"]


def test_an_edit_is_a_sibling_and_its_model_sees_only_its_own_path(chat):
    user, conversation, fake_llm = chat
    answered(user, conversation, "one")
    second = answered(user, conversation, "two")
    answered(user, conversation, "three")
    edited_message = Message.objects.get(pk=second.user_message_id)
    edited = answered(user, conversation, "two, edited", parent_id=edited_message.parent_id)

    assert Message.objects.get(pk=edited.user_message_id).parent_id == edited_message.parent_id
    assert sent_history(fake_llm) == [("user", "one"), ("assistant", "Answer 1 to: one"), ("user", "two, edited")]
    assert branch(conversation) == ["one", "Answer 1 to: one", "two, edited", "Answer 1 to: two, edited"]
    tree = message_tree_of(conversation)
    assert [m.content for m in tree.messages] == [
        "one", "Answer 1 to: one", "two", "Answer 1 to: two", "three", "Answer 1 to: three",
        "two, edited", "Answer 1 to: two, edited"]
    assert tree.sibling_ids()[edited.user_message_id] == [second.user_message_id, edited.user_message_id]

    # The next message continues the new branch, and its model sees that branch only.
    answered(user, conversation, "four")
    assert sent_history(fake_llm) == [
        ("user", "one"), ("assistant", "Answer 1 to: one"), ("user", "two, edited"),
        ("assistant", "Answer 1 to: two, edited"), ("user", "four")]


def test_editing_the_first_message_makes_a_new_root(chat):
    user, conversation, fake_llm = chat
    first = answered(user, conversation, "one")
    answered(user, conversation, "two")
    root = answered(user, conversation, "one, edited", parent_id=None)
    assert Message.objects.get(pk=root.user_message_id).parent_id is None
    assert sent_history(fake_llm) == [("user", "one, edited")]
    assert branch(conversation) == ["one, edited", "Answer 1 to: one, edited"]
    # Back to the first version: its whole branch, the later messages too.
    switch_branch(conversation=conversation, message_id=first.user_message_id)
    assert branch(conversation) == ["one", "Answer 1 to: one", "two", "Answer 1 to: two"]


def test_regenerating_answers_the_same_message_with_the_same_history(chat):
    user, conversation, fake_llm = chat
    answered(user, conversation, "one")
    second = answered(user, conversation, "two")
    first_history = sent_history(fake_llm)
    again = regenerate(user=user, message=answer_of(second), options=RunOptions(model="tree-parrot"))
    assert again.user_message_id == second.user_message_id  # no new user message
    tasks.llm_turn(str(again.id), 0)
    assert sent_history(fake_llm) == first_history
    assert Message.objects.filter(conversation=conversation, role="user").count() == 2
    new_answer = answer_of(again)
    assert new_answer.parent_id == second.user_message_id
    tree = message_tree_of(conversation)
    assert tree.sibling_ids()[new_answer.pk] == [answer_of(second).pk, new_answer.pk]
    assert branch(conversation) == ["one", "Answer 1 to: one", "two", "Answer 2 to: two"]
    # The earlier answer again, with what came after it.
    switch_branch(conversation=conversation, message_id=answer_of(second).pk)
    assert branch(conversation) == ["one", "Answer 1 to: one", "two", "Answer 1 to: two"]


def test_double_texting_with_enqueue_ends_as_one_chain(chat):
    user, conversation, fake_llm = chat
    first = ask(user, conversation, "one")
    second = ask(user, conversation, "two", on_active=OnActive.ENQUEUE)
    third = ask(user, conversation, "three", on_active=OnActive.ENQUEUE)
    # Until the answers are written, each hangs from the message before it.
    assert Message.objects.get(pk=second.user_message_id).parent_id == first.user_message_id
    assert Message.objects.get(pk=third.user_message_id).parent_id == second.user_message_id
    assert conversation.current_leaf == third.user_message_id
    for run in (first, second, third):
        tasks.llm_turn(str(run.id), 0)
    assert Message.objects.get(pk=second.user_message_id).parent_id == answer_of(first).pk
    assert Message.objects.get(pk=third.user_message_id).parent_id == answer_of(second).pk
    assert branch(conversation) == ["one", "Answer 1 to: one", "two", "Answer 1 to: two", "three",
                                    "Answer 1 to: three"]
    # The third run's model saw both earlier answers.
    assert sent_history(fake_llm) == [("user", "one"), ("assistant", "Answer 1 to: one"), ("user", "two"),
                                      ("assistant", "Answer 1 to: two"), ("user", "three")]


def test_double_texting_with_interrupt_follows_the_cancelled_answer(chat):
    user, conversation, _ = chat
    first = ask(user, conversation, "one")
    second = ask(user, conversation, "never mind, two", on_active=OnActive.INTERRUPT)
    assert Run.objects.get(pk=first.pk).status == "cancelled"
    assert Message.objects.get(pk=second.user_message_id).parent_id == answer_of(first).pk
    tasks.llm_turn(str(second.id), 0)
    assert [m.role for m in messages_of(conversation)] == ["user", "assistant", "user", "assistant"]


def test_a_leaf_that_is_gone_gives_the_newest_roots_branch(chat):
    user, conversation, _ = chat
    answered(user, conversation, "one")
    answered(user, conversation, "one, edited", parent_id=None)
    Conversation.objects.filter(pk=conversation.pk).update(current_leaf="00000000-0000-0000-0000-000000000000")
    assert branch(conversation) == ["one, edited", "Answer 1 to: one, edited"]


backfill = importlib.import_module("chatforge.conversations.migrations.0013_message_tree_list_shares")


def test_the_backfill_makes_a_double_texted_conversation_one_chain(make_user):
    """Stored before parents: u1, then u2 (double-texted), then a1, then a2.
    Conversation order puts each answer after its run's question."""
    user, _ = make_user()
    conversation = Conversation.objects.create(user=user)
    start = timezone.now()

    def message(role, text, seconds, run=None):
        created = Message.objects.create(conversation=conversation, role=role, content=text, run=run)
        Message.objects.filter(pk=created.pk).update(created_at=start + timedelta(seconds=seconds))
        return created

    u1 = message("user", "one", 0)
    u2 = message("user", "two", 1)
    r1 = Run.objects.create(conversation=conversation, user=user, user_message=u1, model="demo", status="completed")
    r2 = Run.objects.create(conversation=conversation, user=user, user_message=u2, model="demo", status="completed")
    a1 = message("assistant", "a1", 2, run=r1)
    a2 = message("assistant", "a2", 3, run=r2)
    other = Conversation.objects.create(user=user)  # no messages: left as it is

    backfill.one_branch_per_conversation(apps, None)

    parents = dict(Message.objects.filter(conversation=conversation).values_list("id", "parent_id"))
    assert parents == {u1.pk: None, a1.pk: u1.pk, u2.pk: a1.pk, a2.pk: u2.pk}
    conversation.refresh_from_db()
    assert conversation.current_leaf == a2.pk
    assert [m.content for m in messages_of(conversation)] == ["one", "a1", "two", "a2"]
    other.refresh_from_db()
    assert other.current_leaf is None
