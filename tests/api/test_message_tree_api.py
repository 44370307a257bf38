"""Versions over the REST API (decision 0037): GET messages (the current
branch, ``?tree=1`` every message) with parent_id, sibling_ids and
assistant; POST messages with parent_id; POST /api/messages/{id}/regenerate/;
POST /api/conversations/{id}/branch/; DELETE /api/messages/{id}/; and the
refusals, each JSON that says what to do. Runs are run by calling the
engine's tasks in this process against the fake model server."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from chatforge.catalog.models import Assistant
from chatforge.conversations.models import Conversation, LlmTurn, Message, Run, ToolInvocation
from chatforge.files.models import StoredFile
from orchestration import tasks
from orchestration.event_log import get_event_log
from tests.fakes.openai_server import Reply, last_user_text
from tests.support.files import stored_file

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "tree-api-parrot"


class Chat:
    def __init__(self, client: APIClient, conversation_id: str):
        self.client = client
        self.id = conversation_id

    def post(self, content: str, **extra):
        return self.client.post(f"/api/conversations/{self.id}/messages/",
                                {"content": content, "model": MODEL, **extra}, format="json")

    def answered(self, content: str, **extra) -> dict:
        response = self.post(content, **extra)
        assert response.status_code == 202, response.content
        tasks.llm_turn(response.json()["run_id"], 0)
        return response.json()

    def run(self, accepted: dict) -> None:
        tasks.llm_turn(accepted["run_id"], 0)

    def messages(self, **query) -> list[dict]:
        response = self.client.get(f"/api/conversations/{self.id}/messages/", query)
        assert response.status_code == 200, response.content
        return response.json()["results"]

    def texts(self, **query) -> list[str]:
        return [m["content"] for m in self.messages(**query)]


@pytest.fixture
def chat(settings, fake_llm, idle_broker, make_user) -> Chat:
    settings.OPENAI_BASE_URL = fake_llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.CHATFORGE_MESSAGE_RATE = ""
    counts: dict[str, int] = {}

    def parrot(body):
        text = last_user_text(body)
        counts[text] = counts.get(text, 0) + 1
        return Reply(text=f"Answer {counts[text]} to: {text}")

    fake_llm.add_script(MODEL, parrot)
    user, token = make_user()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    client.user = user
    conversation = client.post("/api/conversations/", {}, format="json").json()["id"]
    return Chat(client, conversation)


def history_sent(fake_llm) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in fake_llm.requests_for(MODEL)[-1]["messages"] if m["role"] != "system"]


def error_of(response, status: int) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    return response.json()["error"]


def test_an_edit_is_a_new_version_and_the_old_one_stays_readable(chat, fake_llm):
    chat.answered("one")
    second = chat.answered("two")
    chat.answered("three")
    listed = chat.messages()
    assert [m["parent_id"] for m in listed] == [None, *[m["id"] for m in listed[:-1]]]
    assert all(m["sibling_ids"] == [m["id"]] for m in listed)
    assert all(m["assistant"] == "" for m in listed)

    edited_parent = next(m for m in listed if m["id"] == second["message_id"])["parent_id"]
    edit = chat.answered("two, edited", parent_id=edited_parent)

    assert chat.texts() == ["one", "Answer 1 to: one", "two, edited", "Answer 1 to: two, edited"]
    assert history_sent(fake_llm) == [("user", "one"), ("assistant", "Answer 1 to: one"), ("user", "two, edited")]
    current = chat.messages()
    assert current[2]["sibling_ids"] == [second["message_id"], edit["message_id"]]
    assert current[3]["sibling_ids"] == [current[3]["id"]]  # the new message's answer has no sibling
    everything = chat.messages(tree="1")
    assert [m["content"] for m in everything] == [
        "one", "Answer 1 to: one", "two", "Answer 1 to: two", "three", "Answer 1 to: three",
        "two, edited", "Answer 1 to: two, edited"]
    conversation = chat.client.get(f"/api/conversations/{chat.id}/").json()
    assert conversation["current_leaf"] == edit["message_id"]


def test_regenerate_adds_an_answer_and_branch_switches_back_to_the_old_one(chat, fake_llm):
    chat.answered("one")
    asked = chat.answered("two")
    chat.answered("three")
    seen_first = fake_llm.requests_for(MODEL)[1]["messages"]
    old_answer = chat.messages()[3]
    assert old_answer["content"] == "Answer 1 to: two"

    regenerated = chat.client.post(f"/api/messages/{old_answer['id']}/regenerate/", {"model": MODEL},
                                   format="json")
    assert regenerated.status_code == 202, regenerated.content
    body = regenerated.json()
    assert body["message_id"] == asked["message_id"] and body["conversation_id"] == chat.id
    assert body["events_sse"].endswith(f"/api/runs/{body['run_id']}/events/")
    chat.run(body)
    assert fake_llm.requests_for(MODEL)[-1]["messages"] == seen_first  # the same history
    current = chat.messages()
    assert [m["content"] for m in current] == ["one", "Answer 1 to: one", "two", "Answer 2 to: two"]
    assert current[3]["sibling_ids"] == [old_answer["id"], current[3]["id"]]
    assert Message.objects.filter(conversation_id=chat.id, role="user").count() == 3

    switched = chat.client.post(f"/api/conversations/{chat.id}/branch/", {"message_id": old_answer["id"]},
                                format="json")
    assert switched.status_code == 200, switched.content
    assert switched.json()["current_leaf"] == old_answer["id"]
    old_branch = ["one", "Answer 1 to: one", "two", "Answer 1 to: two", "three", "Answer 1 to: three"]
    assert [m["content"] for m in switched.json()["messages"]] == old_branch
    assert switched.json()["messages"][3]["sibling_ids"] == current[3]["sibling_ids"]
    # A new request (a reload) keeps it.
    assert chat.texts() == old_branch

    # Regenerating a user message answers that message again.
    again = chat.client.post(f"/api/messages/{asked['message_id']}/regenerate/", {}, format="json")
    assert again.status_code == 202 and again.json()["message_id"] == asked["message_id"]


def test_the_assistant_of_each_answer_is_named(chat):
    Assistant.objects.create(name="poet", system_prompt="Answer in verse.", model=MODEL)
    chat.answered("one", assistant="poet")
    user, answer = chat.messages()
    assert user["assistant"] == "" and answer["assistant"] == "poet"


def test_regenerate_honours_the_idempotency_key(chat):
    chat.answered("one")
    answer = chat.messages()[1]
    url = f"/api/messages/{answer['id']}/regenerate/"
    first = chat.client.post(url, {"model": MODEL}, format="json", HTTP_IDEMPOTENCY_KEY="regen-1")
    repeat = chat.client.post(url, {"model": MODEL}, format="json", HTTP_IDEMPOTENCY_KEY="regen-1")
    assert first.status_code == repeat.status_code == 202
    assert repeat.json()["run_id"] == first.json()["run_id"] and repeat["Idempotent-Replayed"] == "true"
    assert Run.objects.filter(conversation_id=chat.id).count() == 2


def test_delete_removes_the_branch_with_its_runs_and_leaves_the_other(chat):
    first = chat.answered("one")
    second = chat.answered("two")
    chat.answered("three")
    edit = chat.answered("two, edited", parent_id=chat.messages()[1]["id"])
    doomed_runs = list(Run.objects.filter(conversation_id=chat.id).exclude(
        user_message_id__in=[first["message_id"], edit["message_id"]]).values_list("id", flat=True))
    assert len(doomed_runs) == 2
    assert all(get_event_log().info(str(run_id)).exists for run_id in doomed_runs)
    document = stored_file(chat.client.user)
    Message.objects.filter(pk=second["message_id"]).update(
        content_json=[{"type": "text", "text": "two"}, {"type": "file", "file_id": str(document.pk)}])
    StoredFile.objects.filter(pk=document.pk).update(message_id=second["message_id"], conversation_id=chat.id)

    # Back to the old branch, then delete it: the leaf moves to the deleted message's parent.
    chat.client.post(f"/api/conversations/{chat.id}/branch/", {"message_id": second["message_id"]}, format="json")
    deleted = chat.client.delete(f"/api/messages/{second['message_id']}/")
    assert deleted.status_code == 204, deleted.content

    assert not Run.objects.filter(pk__in=doomed_runs).exists()
    assert not LlmTurn.objects.filter(run_id__in=doomed_runs).exists()
    assert not ToolInvocation.objects.filter(run_id__in=doomed_runs).exists()
    assert not any(get_event_log().info(str(run_id)).exists for run_id in doomed_runs)
    assert [m["content"] for m in chat.messages(tree="1")] == [
        "one", "Answer 1 to: one", "two, edited", "Answer 1 to: two, edited"]
    conversation = Conversation.objects.get(pk=chat.id)
    assert str(conversation.current_leaf) == chat.messages()[1]["id"]
    # The branch's newest child is the edit: it is the current branch now.
    assert chat.texts() == ["one", "Answer 1 to: one", "two, edited", "Answer 1 to: two, edited"]
    # The file stays the user's, free to be attached again.
    document.refresh_from_db()
    assert document.message_id is None
    assert chat.post("two again", attachments=[str(document.pk)]).status_code == 202


def test_refusals_while_a_run_is_in_progress(chat):
    first = chat.answered("one")
    answer = chat.messages()[1]
    running = chat.post("two")  # its run is never run here: it stays queued
    assert running.status_code == 202

    edit = error_of(chat.post("one, edited", parent_id=None), 409)
    assert edit["code"] == "run_active" and "wait for it or cancel it" in edit["message"]
    regenerate = error_of(chat.client.post(f"/api/messages/{answer['id']}/regenerate/", {}, format="json"), 409)
    assert "before editing or regenerating" in regenerate["message"]
    switch = error_of(chat.client.post(f"/api/conversations/{chat.id}/branch/",
                                       {"message_id": first["message_id"]}, format="json"), 409)
    assert "before switching versions" in switch["message"]
    delete = error_of(chat.client.delete(f"/api/messages/{running.json()['message_id']}/"), 409)
    assert "before deleting the message" in delete["message"]
    assert delete["details"]["active_run_id"] == running.json()["run_id"]
    # Nothing was written or deleted by the refusals.
    assert Message.objects.filter(conversation_id=chat.id).count() == 3


def test_bad_ids_are_400_naming_the_field_and_other_users_messages_404(chat, make_user):
    chat.answered("one")
    unknown = "00000000-0000-0000-0000-000000000000"
    parent = error_of(chat.post("x", parent_id=unknown), 400)
    assert parent["details"]["field"] == "parent_id" and "leave it out" in parent["message"]
    malformed = error_of(chat.post("x", parent_id="not-a-uuid"), 400)
    assert "parent_id" in str(malformed)
    branch = error_of(chat.client.post(f"/api/conversations/{chat.id}/branch/", {"message_id": unknown},
                                       format="json"), 400)
    assert branch["details"]["field"] == "message_id"
    missing = error_of(chat.client.post(f"/api/conversations/{chat.id}/branch/", {}, format="json"), 400)
    assert "message_id" in str(missing)

    other_user, other_token = make_user()
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {other_token}")
    other_conversation = other.post("/api/conversations/", {}, format="json").json()["id"]
    mine = chat.messages()[0]["id"]
    assert error_of(other.delete(f"/api/messages/{mine}/"), 404)
    assert error_of(other.post(f"/api/messages/{mine}/regenerate/", {}, format="json"), 404)
    assert error_of(other.post(f"/api/messages/{unknown}/regenerate/", {}, format="json"), 404)
    assert error_of(other.delete("/api/messages/not-a-uuid/"), 404)
    # Another conversation's message is not this conversation's.
    foreign = error_of(other.post(f"/api/conversations/{other_conversation}/branch/", {"message_id": mine},
                                  format="json"), 400)
    assert foreign["details"]["field"] == "message_id"
    assert error_of(other.post(f"/api/conversations/{other_conversation}/messages/",
                               {"content": "x", "model": MODEL, "parent_id": mine}, format="json"), 400)
    assert Message.objects.filter(conversation_id=chat.id).count() == 2


def test_regenerating_a_message_with_files_gives_the_model_them_again(chat, fake_llm):
    document = stored_file(chat.client.user, name="notes.txt", data=b"The launch is on Tuesday.")
    first = chat.answered("When is the launch?", attachments=[str(document.pk)])
    sent_first = fake_llm.requests_for(MODEL)[-1]["messages"][-1]["content"]
    assert "The launch is on Tuesday." in str(sent_first)
    # An edit takes the file along; the first version can still be answered again.
    edit = chat.answered("When is it, exactly?", attachments=[str(document.pk)], parent_id=None)
    document.refresh_from_db()
    assert str(document.message_id) == edit["message_id"]
    again = chat.client.post(f"/api/messages/{first['message_id']}/regenerate/", {"model": MODEL}, format="json")
    assert again.status_code == 202, again.content
    chat.run(again.json())
    assert fake_llm.requests_for(MODEL)[-1]["messages"][-1]["content"] == sent_first
    # A file deleted since is left out: the message is still answered.
    document.delete()
    once_more = chat.client.post(f"/api/messages/{first['message_id']}/regenerate/", {"model": MODEL},
                                 format="json")
    assert once_more.status_code == 202, once_more.content
