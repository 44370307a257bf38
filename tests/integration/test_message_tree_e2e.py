"""Versions through the real server and workers (decision 0037): an edit,
a regenerated answer, a switch back to the first version, double-texting
with enqueue, and a deleted branch — over HTTP, each run waited for by its
row's status, and what the model was sent read from the fake model server."""

from __future__ import annotations

import pytest

from chatforge.conversations.models import Message, Run
from orchestration.event_log import get_event_log
from tests.fakes.openai_server import Reply, last_user_text
from tests.support.client import ApiClient
from tests.support.stack import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

MODEL = "tree-e2e-parrot"


def ended(run_id: str) -> None:
    wait_for(lambda: Run.objects.filter(pk=run_id, status="completed").exists(), timeout=60,
             what=f"run {run_id} to complete")


def test_edit_regenerate_switch_double_text_and_delete_over_http(stack, fake_llm, make_user):
    counts: dict[str, int] = {}

    def parrot(body):
        text = last_user_text(body)
        counts[text] = counts.get(text, 0) + 1
        return Reply(text=f"Answer {counts[text]} to: {text}")

    fake_llm.add_script(MODEL, parrot)
    _, token = make_user()
    api = ApiClient(stack.http_url, token)
    conversation = api.new_conversation()

    def say(content: str, **extra) -> dict:
        accepted = api.post_message(conversation, content, model=MODEL, **extra)
        ended(accepted["run_id"])
        return accepted

    def branch() -> list[dict]:
        response = api.request("GET", f"/api/conversations/{conversation}/messages/")
        assert response.status_code == 200, response.text
        return response.json()["results"]

    def sent() -> list[tuple[str, str]]:
        return [(m["role"], m["content"]) for m in fake_llm.requests_for(MODEL)[-1]["messages"] if m["role"] != "system"]

    say("one")
    two = say("two")
    one_user, one_answer = branch()[:2]

    # An edit of "two": a sibling, and its model sees only its own path.
    edit = say("two, edited", parent_id=one_answer["id"])
    assert sent() == [("user", "one"), ("assistant", "Answer 1 to: one"), ("user", "two, edited")]
    current = branch()
    assert [m["content"] for m in current] == ["one", "Answer 1 to: one", "two, edited", "Answer 1 to: two, edited"]
    assert current[2]["sibling_ids"] == [two["message_id"], edit["message_id"]]

    # Regenerate the edit's answer: the same history, a second answer beside the first.
    history = fake_llm.requests_for(MODEL)[-1]["messages"]
    again = api.request("POST", f"/api/messages/{current[3]['id']}/regenerate/", json={"model": MODEL})
    assert again.status_code == 202, again.text
    assert again.json()["message_id"] == edit["message_id"]
    ended(again.json()["run_id"])
    assert fake_llm.requests_for(MODEL)[-1]["messages"] == history
    assert [m["content"] for m in branch()][-1] == "Answer 2 to: two, edited"

    # Back to the first version of "two": its answer, and a reload keeps it.
    switched = api.request("POST", f"/api/conversations/{conversation}/branch/",
                           json={"message_id": two["message_id"]})
    assert switched.status_code == 200, switched.text
    assert [m["content"] for m in branch()] == ["one", "Answer 1 to: one", "two", "Answer 1 to: two"]

    # Double-texting on this branch: both runs end as one chain, the second saw the first's answer.
    first = api.post_message(conversation, "three", model=MODEL)
    second = api.post_message(conversation, "four", model=MODEL, on_active="enqueue")
    ended(first["run_id"])
    ended(second["run_id"])
    assert [m["content"] for m in branch()] == ["one", "Answer 1 to: one", "two", "Answer 1 to: two", "three",
                                                "Answer 1 to: three", "four", "Answer 1 to: four"]
    assert sent()[-2:] == [("assistant", "Answer 1 to: three"), ("user", "four")]

    # Delete the edited version's branch: its runs and their event logs go; this branch stays.
    doomed = [str(r) for r in Run.objects.filter(user_message_id=edit["message_id"]).values_list("id", flat=True)]
    assert len(doomed) == 2
    assert all(get_event_log().info(run_id).exists for run_id in doomed)
    deleted = api.request("DELETE", f"/api/messages/{edit['message_id']}/")
    assert deleted.status_code == 204, deleted.text
    assert not Run.objects.filter(pk__in=doomed).exists()
    assert not Message.objects.filter(pk=edit["message_id"]).exists()
    assert not any(get_event_log().info(run_id).exists for run_id in doomed)
    listed = branch()
    assert [m["content"] for m in listed][:2] == [one_user["content"], one_answer["content"]]
    assert listed[2]["sibling_ids"] == [two["message_id"]]
    assert len(listed) == 8
