"""The event protocol contract: every event type's envelope and payload."""

from __future__ import annotations

import re
import uuid

import pytest
from django.db import transaction

from orchestration.event_log import events

pytestmark = pytest.mark.django_db(transaction=True)

ENVELOPE = {"seq", "type", "run_id", "conversation_id", "ts", "data"}
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture
def log(either_event_log):
    return either_event_log


def test_every_event_type_has_its_contract_shape(log):
    ref = events.RunRef(run_id=str(uuid.uuid4()), conversation_id=str(uuid.uuid4()))
    with transaction.atomic():  # state events are published on commit
        events.turn_started(ref, iteration=0, message_id="m1")
        events.content_delta(ref, text="Hel")
        events.reasoning_delta(ref, text="think")
        events.tool_call(ref, tool_call_id="c1", name="echo", arguments='{"text":"x"}', iteration=0, text_offset=3)
        events.tool_retry(ref, tool_call_id="c1", attempt=1, error="boom")
        events.tool_output(ref, tool_call_id="c1", name="echo", output="x", status="success", execution_time_ms=2)
        events.run_completed(ref, message_id="m2", finish_reason="stop", usage={"total_tokens": 3},
                             max_iterations_reached=False)
    published = log.read(ref.run_id, after=0)

    assert [e["seq"] for e in published] == list(range(1, 9))
    for event in published:
        assert set(event) == ENVELOPE
        assert event["run_id"] == ref.run_id and event["conversation_id"] == ref.conversation_id
        assert TS.match(event["ts"])
    data = {e["type"]: e["data"] for e in published}
    # Immediate events first, then the on-commit ones in publication order.
    assert [e["type"] for e in published] == [
        "run.started", "llm.started", "content.delta", "reasoning.delta", "tool.retry",
        "tool_call", "tool_output", "run.completed",
    ]
    assert data["run.started"] == {"conversation_id": ref.conversation_id, "message_id": "m1"}
    assert data["llm.started"] == {"iteration": 0}
    assert data["content.delta"] == {"text": "Hel"}
    assert data["reasoning.delta"] == {"text": "think"}
    assert data["tool_call"] == {"id": "c1", "name": "echo", "arguments": '{"text":"x"}', "iteration": 0, "text_offset": 3}
    assert data["tool.retry"] == {"tool_call_id": "c1", "attempt": 1, "error": "boom"}
    assert data["tool_output"] == {"tool_call_id": "c1", "name": "echo", "output": "x", "status": "success",
                                   "execution_time_ms": 2}
    assert data["run.completed"] == {"message_id": "m2", "finish_reason": "stop", "usage": {"total_tokens": 3},
                                     "max_iterations_reached": False}


@pytest.mark.parametrize(
    ("publish", "expected"),
    [
        (lambda ref: events.run_failed(ref, error="The provider rejected the key.", message_id="m"),
         ("run.failed", {"error": "The provider rejected the key.", "message_id": "m"})),
        (lambda ref: events.run_cancelled(ref, message_id="m"), ("run.cancelled", {"message_id": "m"})),
    ],
)
def test_terminal_events_close_the_log(log, publish, expected):
    ref = events.RunRef(run_id=str(uuid.uuid4()), conversation_id="c")
    with transaction.atomic():
        publish(ref)
        events.run_completed(ref, message_id="x", finish_reason="stop", usage={}, max_iterations_reached=False)
    events.content_delta(ref, text="late")
    published = log.read(ref.run_id, after=0)
    assert [(e["type"], e["data"]) for e in published] == [expected]


def test_state_events_are_not_published_when_the_transaction_rolls_back(log):
    ref = events.RunRef(run_id=str(uuid.uuid4()), conversation_id="c")
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            events.tool_output(ref, tool_call_id="c1", name="echo", output="x", status="success", execution_time_ms=1)
            raise RuntimeError("rolled back")
    assert log.read(ref.run_id, after=0) == []
