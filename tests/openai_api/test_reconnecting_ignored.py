"""``/v1`` answers carry nothing of ``run.reconnecting`` (docs/events.md,
"When a worker is lost"): OpenAI's chunks have no place for it, and the
step's new delivery announces itself with the events ``/v1`` already
translates. Neither a chunk nor an error comes of it, streamed or not."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest

from chatforge.openai_api.translate import ROUND_SEPARATOR, ToolEventCollector
from orchestration.event_log.events import RunRef, run_reconnecting
from tests.fakes.openai_server import Reply, round_of

REASON = "The worker running this step stopped answering; the step is being run again."
# A safety net only: the test releases the held turn itself.
_HOLD_AT_MOST_S = 45.0


def test_the_non_streamed_answer_ignores_it():
    collector = ToolEventCollector()
    for event in [
        {"seq": 1, "type": "llm.started", "data": {"iteration": 0}},
        {"seq": 2, "type": "content.delta", "data": {"text": "Half"}},
        {"seq": 3, "type": "run.reconnecting", "data": {"iteration": 0, "step": "llm_turn", "tool_call_id": None,
                                                         "reason": REASON}},
        {"seq": 4, "type": "content.delta", "data": {"text": " and half."}},
    ]:
        collector.on_event(event)
    assert collector.finish() == [{"type": "text", "value": "Half and half."}]


class SecondTurnHeld:
    """The first turn says a few words and calls ``echo``; the second waits
    for ``release`` (``arrived`` is set once the engine asked for it)."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.release = threading.Event()

    def __call__(self, body: dict[str, Any]) -> Reply:
        if round_of(body) == 0:
            return Reply(text="Let me look.", tool_calls=[("echo", {"text": "hi"})])
        self.arrived.set()
        self.release.wait(_HOLD_AT_MOST_S)
        return Reply(text="It said hi.")


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_the_stream_ignores_it(stack, fake_llm, make_user):
    script = SecondTurnHeld()
    fake_llm.add_script("oa-reconnecting", script)
    _, token = make_user()
    body = {"model": "oa-reconnecting", "messages": [{"role": "user", "content": "echo hi"}],
            "tools": ["echo"], "stream": True}
    try:
        with httpx.stream("POST", stack.http_url + "/v1/chat/completions", json=body, timeout=60,
                          headers={"Authorization": f"Bearer {token}"}) as response:
            assert response.status_code == 200
            lines = response.iter_lines()
            first = json.loads(next(line for line in lines if line).removeprefix("data: "))
            assert script.arrived.wait(60), "the run's second model turn never reached the fake LLM"
            run_reconnecting(RunRef(run_id=first["run_id"], conversation_id=first["conversation_id"]),
                             iteration=1, step="llm_turn", tool_call_id=None, reason=REASON)
            script.release.set()
            rest = [line for line in lines if line]
    finally:
        script.release.set()
    assert rest[-1] == "data: [DONE]"
    chunks = [json.loads(line.removeprefix("data: ")) for line in rest[:-1]]
    assert not [chunk for chunk in chunks if "error" in chunk]
    assert "run.reconnecting" not in json.dumps(chunks) and REASON not in json.dumps(chunks)
    text = "".join(chunk["choices"][0]["delta"].get("content") or "" for chunk in chunks if chunk["choices"])
    assert text == "Let me look." + ROUND_SEPARATOR + "It said hi."
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
