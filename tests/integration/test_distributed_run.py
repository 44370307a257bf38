"""A run end to end on the distributed stack: REST in, real Celery workers on
Postgres and Redis, events out over a real websocket."""

from __future__ import annotations

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from chatforge.conversations.models import Message, Run, ToolInvocation
from tests.fakes.openai_server import Reply, always_tool
from tests.support.client import ApiClient, follow_run, run_socket_url

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TERMINAL = {"run.completed", "run.failed", "run.cancelled"}


def two_round_script() -> list[Reply]:
    return [
        Reply(
            text="Let me check two things.",
            tool_calls=[("get_time", {"timezone": "Europe/Paris"}), ("calculator", {"expression": "6*7"})],
        ),
        Reply(text="One more.", tool_calls=[("echo", {"text": "forty-two"})]),
        Reply(text="It is late in Paris, 6*7 is 42, and the echo said forty-two."),
    ]


def assert_well_formed(events: list[dict]) -> None:
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["type"] == "run.started"
    assert [e["type"] for e in events].count("run.completed") == 1
    assert events[-1]["type"] == "run.completed"
    assert not any(e["type"] in TERMINAL for e in events[:-1])


def test_two_tool_rounds_end_to_end(stack, fake_llm, make_user):
    fake_llm.add_script("e2e-two-rounds", two_round_script())
    user, token = make_user()
    api = ApiClient(stack.http_url, token)
    conversation_id = api.new_conversation()

    accepted = api.post_message(conversation_id, "What time is it in Paris, and 6*7?", model="e2e-two-rounds")
    assert accepted["status"] == "queued"
    assert accepted["events_ws"].endswith(f"/ws/runs/{accepted['run_id']}/")
    events = follow_run(stack.ws_url, accepted["run_id"], token)

    assert_well_formed(events)
    assert events[0]["data"]["message_id"] == accepted["message_id"]
    for event in events:
        assert event["run_id"] == accepted["run_id"]
        assert event["conversation_id"] == conversation_id
        assert event["ts"].endswith("Z")
    calls = [e["data"] for e in events if e["type"] == "tool_call"]
    outputs = {e["data"]["tool_call_id"]: e["data"] for e in events if e["type"] == "tool_output"}
    assert [c["name"] for c in calls] == ["get_time", "calculator", "echo"]
    assert [c["iteration"] for c in calls] == [0, 0, 1]
    assert set(outputs) == {c["id"] for c in calls}
    assert all(o["status"] == "success" for o in outputs.values())
    # Text streamed before the first round's calls sits before its offset.
    assert calls[0]["text_offset"] == len("Let me check two things.")
    # Every output comes after its call.
    position = {(e["type"], e["data"].get("id") or e["data"].get("tool_call_id")): i for i, e in enumerate(events)}
    for call in calls:
        assert position[("tool_call", call["id"])] < position[("tool_output", call["id"])]
    text = "".join(e["data"]["text"] for e in events if e["type"] == "content.delta")
    assert text.endswith("It is late in Paris, 6*7 is 42, and the echo said forty-two.")

    run = Run.objects.get(pk=accepted["run_id"])
    assert run.status == "completed" and run.iteration == 2 and not run.max_iterations_reached
    assistant = Message.objects.filter(run=run, role="assistant")
    assert assistant.count() == 1
    message = assistant.get()
    assert events[-1]["data"]["message_id"] == str(message.id)
    assert message.content == "It is late in Paris, 6*7 is 42, and the echo said forty-two."
    assert [r["assistant_response"] for r in message.tool_rounds] == ["Let me check two things.", "One more."]
    assert [[c["name"] for c in r["tool_calls"]] for r in message.tool_rounds] == [["get_time", "calculator"], ["echo"]]
    assert message.tool_rounds[0]["results"][1]["output"] == '{"expression":"6*7","result":42}'
    assert message.tool_rounds[1]["results"][0]["output"] == "forty-two"
    assert ToolInvocation.objects.filter(run=run).count() == 3

    # The REST view of the conversation shows the same.
    listed = api.request("GET", f"/api/conversations/{conversation_id}/messages/").json()["results"]
    assert [m["role"] for m in listed] == ["user", "assistant"]
    assert listed[1]["tool_rounds"] == message.tool_rounds
    status = api.request("GET", f"/api/runs/{run.id}/").json()
    assert status["status"] == "completed" and status["message_id"] == str(message.id)

    # The model saw the first round's results in OpenAI's format on its third turn.
    third = [r for r in fake_llm.requests if r.get("model") == "e2e-two-rounds"][-1]
    roles = [m["role"] for m in third["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "assistant", "tool"]


def test_reconnect_with_after_gets_exactly_the_missed_events(stack, fake_llm, make_user):
    slow = Reply(text=" ".join(f"word{i}" for i in range(60)), chunk_delay_s=0.05)
    fake_llm.add_script("e2e-slow", [Reply(text="Checking.", tool_calls=[("echo", {"text": "x"})]), slow])
    _, token = make_user()
    api = ApiClient(stack.http_url, token)
    accepted = api.post_message(api.new_conversation(), "talk slowly", model="e2e-slow")

    first = follow_run(stack.ws_url, accepted["run_id"], token, limit=8)
    assert [e["seq"] for e in first] == list(range(1, 9))
    assert first[-1]["type"] not in TERMINAL, "the run should still be going when we disconnect"
    rest = follow_run(stack.ws_url, accepted["run_id"], token, after=first[-1]["seq"])

    assert [e["seq"] for e in rest] == list(range(9, 9 + len(rest)))
    assert_well_formed(first + rest)
    # A late subscriber replaying from the start sees the very same events.
    assert follow_run(stack.ws_url, accepted["run_id"], token, after=0) == first + rest


def test_iteration_cap_forces_a_final_answer(stack, fake_llm, make_user):
    fake_llm.add_script("e2e-loop", always_tool("echo", {"text": "again"}))
    _, token = make_user()
    api = ApiClient(stack.http_url, token)
    accepted = api.post_message(api.new_conversation(), "loop forever", model="e2e-loop", max_iterations=3)

    events = follow_run(stack.ws_url, accepted["run_id"], token)

    assert_well_formed(events)
    assert events[-1]["data"]["max_iterations_reached"] is True
    assert [e["type"] for e in events].count("tool_call") == 3
    requests = [r for r in fake_llm.requests if r.get("model") == "e2e-loop"]
    assert len(requests) == 4
    assert all(r.get("tools") for r in requests[:3]) and not requests[3].get("tools")
    message = Message.objects.get(run_id=accepted["run_id"], role="assistant")
    assert message.content == "Stopping after 3 tool results."
    assert len(message.tool_rounds) == 3
    assert Run.objects.get(pk=accepted["run_id"]).max_iterations_reached


def test_other_users_get_404_and_a_refused_socket(stack, fake_llm, make_user):
    fake_llm.add_script("e2e-plain", [Reply(text="hello")])
    _, owner_token = make_user()
    _, other_token = make_user()
    owner = ApiClient(stack.http_url, owner_token)
    other = ApiClient(stack.http_url, other_token)
    conversation_id = owner.new_conversation()
    accepted = owner.post_message(conversation_id, "hi", model="e2e-plain")
    follow_run(stack.ws_url, accepted["run_id"], owner_token)
    run_id = accepted["run_id"]

    for method, path, body in [
        ("GET", f"/api/conversations/{conversation_id}/", None),
        ("GET", f"/api/conversations/{conversation_id}/messages/", None),
        ("POST", f"/api/conversations/{conversation_id}/messages/", {"content": "mine now"}),
        ("DELETE", f"/api/conversations/{conversation_id}/", None),
        ("GET", f"/api/runs/{run_id}/", None),
        ("POST", f"/api/runs/{run_id}/cancel/", None),
    ]:
        response = other.request(method, path, json=body)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["error"]["code"] == "not_found"
    assert other.request("GET", "/api/conversations/").json()["results"] == []

    with pytest.raises(InvalidStatus) as refused:
        with connect(run_socket_url(stack.ws_url, run_id), additional_headers={"Authorization": f"Bearer {other_token}"}):
            pass
    assert refused.value.response.status_code == 403
    with pytest.raises(InvalidStatus):
        with connect(run_socket_url(stack.ws_url, run_id)):
            pass  # no credentials at all
    # The owner's conversation is untouched.
    assert len(owner.request("GET", f"/api/conversations/{conversation_id}/messages/").json()["results"]) == 2


def test_cancel_over_the_socket_keeps_the_partial_text(stack, fake_llm, make_user):
    import json

    slow = Reply(text=" ".join(f"w{i}" for i in range(200)), chunk_delay_s=0.05)
    fake_llm.add_script("e2e-cancel", [slow])
    _, token = make_user()
    api = ApiClient(stack.http_url, token)
    accepted = api.post_message(api.new_conversation(), "say a lot", model="e2e-cancel")

    events = []
    with connect(run_socket_url(stack.ws_url, accepted["run_id"]),
                 additional_headers={"Authorization": f"Bearer {token}"}) as ws:
        while True:
            event = json.loads(ws.recv(timeout=30))
            events.append(event)
            if event["type"] == "content.delta" and len(events) == 5:
                ws.send(json.dumps({"type": "cancel"}))
            if event["type"] in TERMINAL:
                break

    assert events[-1]["type"] == "run.cancelled"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    streamed = "".join(e["data"]["text"] for e in events if e["type"] == "content.delta")
    run = Run.objects.get(pk=accepted["run_id"])
    assert run.status == "cancelled" and run.cancel_requested
    message = Message.objects.get(run=run, role="assistant")
    assert message.status == "cancelled"
    assert events[-1]["data"]["message_id"] == str(message.id)
    assert message.content and streamed.startswith(message.content)
    assert len(message.content) < len(slow.text)
