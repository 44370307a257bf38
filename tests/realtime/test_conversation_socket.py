"""``/ws/conversations/{id}/``: the events of every run of a conversation —
runs active at connect and runs started while connected."""

from __future__ import annotations

import json
import time

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TERMINAL = {"run.completed", "run.failed", "run.cancelled"}


def socket(stack, conversation_id: str, token: str):
    return connect(f"{stack.ws_url}/ws/conversations/{conversation_id}/",
                   additional_headers={"Authorization": f"Bearer {token}"}, open_timeout=10)


def until_ended(ws, run_ids: set[str]) -> list[dict]:
    events, ended = [], set()
    while ended != run_ids:
        event = json.loads(ws.recv(timeout=60))
        events.append(event)
        if event["type"] in TERMINAL:
            ended.add(event["run_id"])
    return events


def by_run(events: list[dict]) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for event in events:
        grouped.setdefault(event["run_id"], []).append(event)
    return grouped


def test_runs_active_at_connect_and_started_later(stack, fake_llm, make_user):
    slow = Reply(text=" ".join(f"s{i}" for i in range(30)), chunk_delay_s=0.05)
    fake_llm.add_script("conv-slow", [slow])
    fake_llm.add_script("conv-tool", [Reply(text="Adding.", tool_calls=[("calculator", {"expression": "1+1"})]),
                                      Reply(text="It is 2.")])
    fake_llm.add_script("conv-quick", [Reply(text="Quick answer.")])
    _, token = make_user()
    api = ApiClient(stack.http_url, token)
    conversation_id = api.new_conversation()
    first = api.post_message(conversation_id, "talk", model="conv-slow")["run_id"]

    with socket(stack, conversation_id, token) as ws:
        events = until_ended(ws, {first})
        second = api.post_message(conversation_id, "add", model="conv-tool")["run_id"]
        events += until_ended(ws, {second})
        third = api.post_message(conversation_id, "quick", model="conv-quick")["run_id"]
        events += until_ended(ws, {third})

    runs = by_run(events)
    assert set(runs) == {first, second, third}
    for run_id, run_events in runs.items():
        assert [e["seq"] for e in run_events] == list(range(1, len(run_events) + 1)), run_id
        assert run_events[0]["type"] == "run.started" and run_events[-1]["type"] == "run.completed"
        assert all(e["conversation_id"] == conversation_id for e in run_events)
    assert "".join(e["data"]["text"] for e in runs[first] if e["type"] == "content.delta") == slow.text
    assert [e["data"]["name"] for e in runs[second] if e["type"] == "tool_call"] == ["calculator"]


def test_finished_runs_are_not_replayed_and_cancel_names_a_run(stack, fake_llm, make_user):
    fake_llm.add_script("conv-done", [Reply(text="done")])
    fake_llm.add_script("conv-long", [Reply(text=" ".join(f"l{i}" for i in range(300)), chunk_delay_s=0.05)])
    _, token = make_user()
    api = ApiClient(stack.http_url, token)
    conversation_id = api.new_conversation()
    done = api.post_message(conversation_id, "one", model="conv-done")["run_id"]
    while api.request("GET", f"/api/runs/{done}/").json()["status"] != "completed":
        time.sleep(0.1)

    with socket(stack, conversation_id, token) as ws:
        ws.send(json.dumps({"type": "cancel"}))
        assert "run_id" in json.loads(ws.recv(timeout=30))["data"]["message"]
        long_run = api.post_message(conversation_id, "long", model="conv-long")["run_id"]
        first = json.loads(ws.recv(timeout=30))
        assert first["run_id"] == long_run and first["type"] == "run.started"
        ws.send(json.dumps({"type": "cancel", "run_id": long_run}))
        events = [first] + until_ended(ws, {long_run})
    assert {e["run_id"] for e in events} == {long_run}
    assert events[-1]["type"] == "run.cancelled"


def test_other_users_and_unknown_conversations_are_refused(stack, make_user):
    _, owner = make_user()
    _, other = make_user()
    conversation_id = ApiClient(stack.http_url, owner).new_conversation()
    for token, target in [(other, conversation_id), (owner, "not-a-conversation"), (None, conversation_id)]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        with pytest.raises(InvalidStatus) as refused:
            with connect(f"{stack.ws_url}/ws/conversations/{target}/", additional_headers=headers):
                pass
        assert refused.value.response.status_code == 403
