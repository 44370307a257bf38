"""Logs an operator can follow a run by: in distributed mode every line is a
JSON object, and one run's lines — on the web process and on both workers —
carry its run_id, with the conversation, user, task, tool call and request
bound where they apply."""

from __future__ import annotations

import json

import pytest

from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient, follow_run

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def json_lines(text: str) -> list[dict]:
    """The log's JSON records (Celery's start-up banner is printed, not logged)."""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_one_run_id_finds_the_run_on_every_process(stack, fake_llm, make_user):
    fake_llm.add_script("logged-run", [Reply(text="Echo.", tool_calls=[("echo", {"text": "a"})]),
                                       Reply(text="Done.")])
    user, token = make_user()
    api = ApiClient(stack.http_url, token)
    accepted = api.post_message(api.new_conversation(), "go", model="logged-run")
    run_id = accepted["run_id"]
    events = follow_run(stack.ws_url, run_id, token)
    assert events[-1]["type"] == "run.completed", stack.logs()

    by_process = {name: [r for r in json_lines(stack.process(name).log()) if r.get("run_id") == run_id]
                  for name in ("server", "llm", "tools")}
    assert all(by_process.values()), {name: len(records) for name, records in by_process.items()}

    accepted_line = next(r for r in by_process["server"] if r["event"] == "run accepted")
    assert accepted_line["user_id"] == user.id and accepted_line["request_id"]
    assert accepted_line["conversation_id"] == accepted["conversation_id"] and accepted_line["model"] == "logged-run"

    tool_line = next(r for r in by_process["tools"] if r.get("tool_name") == "echo")
    call_id = next(e["data"]["id"] for e in events if e["type"] == "tool_call")
    assert tool_line["tool_call_id"] == call_id and tool_line["task"] == "chatforge.tool_call"
    assert tool_line["task_id"] and tool_line["user_id"] == user.id and tool_line["level"] == "info"
    assert any(r["task"] == "chatforge.llm_turn" and r["task_id"] for r in by_process["llm"])
    # uvicorn's access lines are records too, with their parts as fields.
    server_log = stack.process("server").log()
    access = [r for r in json_lines(server_log) if r.get("logger") == "uvicorn.access"]
    assert any(r["method"] == "POST" and r["path"].endswith("/messages/") and r["status"] == 202
               for r in access), access[-5:]
    assert not [line for line in server_log.splitlines() if line.startswith(("INFO:", "WARNING:", "ERROR:"))]
    # Every record of these processes is JSON with a level and a timestamp.
    for name in ("server", "llm", "tools"):
        assert all("level" in r and "timestamp" in r for r in json_lines(stack.process(name).log()))
