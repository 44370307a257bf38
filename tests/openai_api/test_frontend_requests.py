"""What frontends such as Open WebUI send through /v1, against the live
stack with the official OpenAI SDK: the whole history again with every
turn (continued in one ChatForge conversation when it is exactly one of
the user's), and requests of their own (titles, tags) sent to the
``background-tasks`` model (one model turn, no tools, kept apart)."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from chatforge.conversations.models import Conversation, Message, Run
from tests.fakes.openai_server import Reply, last_user_text, tool_results

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def sdk(stack, token: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.http_url + "/v1", api_key=token, max_retries=0, timeout=60)


def streamed(stream) -> tuple[str, str]:
    """The text a streaming frontend shows, and the conversation id."""
    text, conversation_id = "", ""
    for chunk in stream:
        conversation_id = conversation_id or (chunk.model_extra or {}).get("conversation_id", "")
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
    return text, conversation_id


def calculating_model(body):
    """Each question: a turn with text and a calculator call, then the answer."""
    if not tool_results(body):
        return Reply(text="Let me calculate.", tool_calls=[("calculator", {"expression": "6*7"})])
    return Reply(text=f"{last_user_text(body)}: {json.loads(tool_results(body)[-1]['content'])['result']}.")


def test_a_frontend_resending_its_history_stays_in_one_conversation(stack, fake_llm, make_user):
    fake_llm.add_script("resend", calculating_model)
    user, token = make_user()
    client = sdk(stack, token)
    history = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "first"}]

    answer, first_id = streamed(client.chat.completions.create(model="resend", messages=history, stream=True))
    assert answer == "Let me calculate.\n\nfirst: 42."  # both model turns, as the frontend keeps them
    history += [{"role": "assistant", "content": answer}, {"role": "user", "content": "second"}]
    answer, second_id = streamed(client.chat.completions.create(model="resend", messages=history, stream=True))
    assert (answer, second_id) == ("Let me calculate.\n\nsecond: 42.", first_id)
    # Not streamed, the frontend keeps only the final turn's text: the same conversation.
    history += [{"role": "assistant", "content": "second: 42."}, {"role": "user", "content": "third"}]
    third = client.chat.completions.create(model="resend", messages=history)
    assert third.model_extra["conversation_id"] == first_id

    stored = Message.objects.filter(conversation_id=first_id).order_by("created_at", "id")
    assert [m.role for m in stored] == ["system"] + ["user", "assistant"] * 3
    assert Conversation.objects.filter(user=user).count() == 1
    # The model's history is the stored one: the earlier rounds' calls and results included.
    seen = fake_llm.requests_for("resend")[-2]["messages"]
    assert [m["role"] for m in seen] == ["system", "user", "assistant", "tool", "assistant", "user", "assistant",
                                         "tool", "assistant", "user"]


@pytest.mark.parametrize("change", ["edited answer", "edited question", "regenerated"])
def test_a_history_that_is_not_a_stored_conversation_starts_a_new_one(stack, fake_llm, make_user, change):
    fake_llm.add_script("resend-changed", calculating_model)
    _, token = make_user()
    client = sdk(stack, token)
    first = client.chat.completions.create(model="resend-changed", messages=[{"role": "user", "content": "first"}])
    kept = first.choices[0].message.content
    history = {
        "edited answer": [{"role": "user", "content": "first"}, {"role": "assistant", "content": kept + " (edited)"},
                          {"role": "user", "content": "second"}],
        "edited question": [{"role": "user", "content": "first?"}, {"role": "assistant", "content": kept},
                            {"role": "user", "content": "second"}],
        # Asked again after a second turn: the stored conversation holds more than the history.
        "regenerated": [{"role": "user", "content": "first"}, {"role": "assistant", "content": kept},
                        {"role": "user", "content": "second"}],
    }[change]
    if change == "regenerated":
        client.chat.completions.create(model="resend-changed", messages=history)
    again = client.chat.completions.create(model="resend-changed", messages=history)
    assert again.model_extra["conversation_id"] != first.model_extra["conversation_id"]
    assert Message.objects.filter(conversation_id=first.model_extra["conversation_id"]).count() == \
        (4 if change == "regenerated" else 2)


def test_background_tasks_run_one_turn_without_tools_and_are_kept_apart(stack, make_user):
    user, token = make_user()
    client = sdk(stack, token)
    assert "background-tasks" in [m.id for m in client.models.list().data]
    frontend_tool = {"type": "function", "function": {
        "name": "search_notes", "description": "The frontend's own tool.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}}
    title = client.chat.completions.create(
        model="background-tasks", tools=[frontend_tool],
        messages=[{"role": "user", "content": "### Task:\nGenerate a concise title for this chat."}])
    assert title.model == "background-tasks" and title.choices[0].finish_reason == "stop"

    run = Run.objects.get(user=user)
    assert run.model == "demo"  # the default model answers (CHATFORGE_OPENAI_BACKGROUND_TASKS_MODEL unset)
    assert run.options["tools"] == [] and run.options["max_iterations"] == 0
    assert "client_tools" not in run.options
    assert run.conversation.source == "task"
    api = httpx.Client(base_url=stack.http_url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert api.get("/api/conversations/").json()["results"] == []
    listed = api.get("/api/conversations/?source=task").json()["results"]
    assert [c["id"] for c in listed] == [str(run.conversation_id)]


@pytest.mark.django_db
def test_background_tasks_do_not_count_against_the_message_rate(make_user, idle_broker, settings):
    """A person's one message, then the frontend's title and tags: only the
    message counts. (Streamed, the response is answered at once; the runs
    wait in the idle broker.)"""
    from django.core.cache import cache
    from django.test import Client

    cache.clear()  # earlier tests' users had the same ids
    settings.CHATFORGE_MESSAGE_RATE = "1/min"
    settings.CHATFORGE_MAX_ACTIVE_RUNS_PER_USER = 10
    _, token = make_user()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")

    def post(model: str, text: str) -> int:
        body = {"model": model, "stream": True, "messages": [{"role": "user", "content": text}]}
        return client.post("/v1/chat/completions", body, content_type="application/json").status_code

    assert post("demo", "hello") == 200
    assert [post("background-tasks", task) for task in ("title", "tags", "follow-ups")] == [200, 200, 200]
    assert post("demo", "hello again") == 429
