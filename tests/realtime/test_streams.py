"""Reading a run's events through ``follow_run`` when the log is whole,
trimmed, missing, or missing its terminal event: seqs only rise, and a
snapshot from Postgres stands in for what the log lost."""

from __future__ import annotations

import asyncio

import pytest
import redis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections

from chatforge.conversations.models import Message, Run
from orchestration.event_log import get_event_log
from orchestration.event_log.memory import InMemoryEventLog
from orchestration.services.run_follower import follow_run
from tests.support.stepped_runs import finish, first_turn

from .conftest import collect, start

pytestmark = pytest.mark.django_db(transaction=True)

FLOOR = 10**15  # a restarted log counts from Redis' clock in microseconds


def assert_rising(events: list[dict]) -> None:
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs)), seqs


def test_a_whole_log_is_passed_through(finished_run):
    events = collect(str(finished_run.id))
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events == get_event_log().read(str(finished_run.id), after=0)
    assert "snapshot" not in [e["type"] for e in events]


@pytest.mark.parametrize("after", [0, 5])
def test_finished_run_whose_log_is_gone_gets_a_snapshot_then_the_terminal_event(finished_run, after):
    get_event_log().delete(str(finished_run.id))

    snapshot, terminal = collect(str(finished_run.id), after=after)

    message = Message.objects.get(run=finished_run, role="assistant")
    assert snapshot["type"] == "snapshot" and snapshot["seq"] == after + 1
    assert snapshot["run_id"] == str(finished_run.id)
    assert snapshot["conversation_id"] == str(finished_run.conversation_id)
    assert snapshot["ts"].endswith("Z")
    data = snapshot["data"]
    assert data["status"] == "completed" and data["iteration"] == 1 and data["error"] is None
    assert data["partial_text"] is None and data["reason"] == "log_missing"
    assert data["user_message_id"] == str(finished_run.user_message_id)
    assert data["message"] == {
        "id": str(message.id), "content": "The answer is 42.", "tool_rounds": message.tool_rounds,
        "status": "final", "finish_reason": message.finish_reason, "usage": message.usage,
    }
    assert [[c["name"] for c in r["tool_calls"]] for r in data["rounds"]] == [["calculator", "echo"]]
    assert data["rounds"] == message.tool_rounds
    assert terminal == {
        "seq": after + 2, "type": "run.completed", "run_id": str(finished_run.id),
        "conversation_id": str(finished_run.conversation_id), "ts": terminal["ts"],
        "data": {"message_id": str(message.id), "finish_reason": finished_run.finish_reason,
                 "usage": finished_run.usage, "max_iterations_reached": False},
    }


def test_failed_and_cancelled_runs_get_their_own_terminal_event(finished_run):
    run_id = str(finished_run.id)
    message_id = str(Message.objects.get(run=finished_run, role="assistant").id)
    get_event_log().delete(run_id)
    Run.objects.filter(pk=run_id).update(status="failed", error="The provider rejected the key.")
    assert collect(run_id)[-1]["type"] == "run.failed"
    assert collect(run_id)[-1]["data"] == {"error": "The provider rejected the key.", "message_id": message_id}
    Run.objects.filter(pk=run_id).update(status="cancelled")
    terminal = collect(run_id)[-1]
    assert terminal["type"] == "run.cancelled" and terminal["data"] == {"message_id": message_id}


def test_live_run_whose_log_is_deleted_mid_run(engine):
    run = start(engine)
    calls = first_turn(run)
    run_id = str(run.id)
    seen = get_event_log().read(run_id, after=0)  # what a client had when the log went
    cursor = seen[-1]["seq"]
    get_event_log().delete(run_id)

    async def returning_client() -> list[dict]:
        stream = follow_run(run_id, after=cursor, block_ms=200)
        snapshot = await anext(stream)  # at once, before the workers append again
        await sync_to_async(finish)(run, calls)
        rest = [event async for event in stream]
        await sync_to_async(connections.close_all)()
        return [snapshot] + rest

    events = asyncio.run(returning_client())

    snapshot = events[0]
    assert snapshot["type"] == "snapshot" and snapshot["seq"] == cursor + 1
    assert snapshot["data"]["status"] == "running" and snapshot["data"]["message"] is None
    assert snapshot["data"]["reason"] == "log_missing" and snapshot["data"]["partial_text"] is None
    (rnd,) = snapshot["data"]["rounds"]
    assert [r["status"] for r in rnd["results"]] == ["pending", "pending"]  # not yet run, not "cut off"
    assert_rising(seen + events)
    assert [e["type"] for e in events[1:]].count("snapshot") == 0  # the new log follows without another
    assert events[1]["seq"] > FLOOR
    assert events[-1]["type"] == "run.completed"
    assert {e["data"]["tool_call_id"] for e in events if e["type"] == "tool_output"} == set(calls)

    # A new subscriber: the snapshot stands in for the lost first log.
    late = collect(run_id)
    assert late[0]["type"] == "snapshot" and late[0]["seq"] == events[1]["seq"] - 1
    assert late[0]["data"]["reason"] == "events_missing" and late[0]["data"]["status"] == "completed"
    assert late[1:] == events[1:]


def test_new_subscriber_of_a_live_run_with_a_lost_log_gets_a_snapshot_at_once(engine):
    run = start(engine)
    calls = first_turn(run)
    get_event_log().delete(str(run.id))

    (snapshot,) = collect(str(run.id), limit=1)
    assert snapshot["type"] == "snapshot" and snapshot["seq"] == 1
    finish(run, calls)
    events = collect(str(run.id), after=1)
    assert events[0]["seq"] > FLOOR and events[-1]["type"] == "run.completed"


def test_trimmed_log_gets_a_snapshot_for_the_missing_start(finished_run):
    run_id = str(finished_run.id)
    whole = get_event_log().read(run_id, after=0)
    log = get_event_log()
    if isinstance(log, InMemoryEventLog):
        state = log._runs[run_id]
        state.base, state.events = 3, state.events[3:]
    else:
        redis.Redis.from_url(settings.CHATFORGE_EVENT_LOG_REDIS_URL).xtrim(
            f"cf:run:{{{run_id}}}:events", minid="0-4", approximate=False
        )

    events = collect(run_id, after=1)

    assert events[0]["type"] == "snapshot" and events[0]["seq"] == 3
    assert events[0]["data"]["reason"] == "events_missing"
    assert events[1:] == whole[3:]
    assert collect(run_id, after=3) == whole[3:]  # nothing missing from 4 on: no snapshot


def test_log_without_its_terminal_event_gets_it_rebuilt(finished_run):
    run_id = str(finished_run.id)
    whole = get_event_log().read(run_id, after=0)
    log = get_event_log()
    if isinstance(log, InMemoryEventLog):
        state = log._runs[run_id]
        state.events.pop()
        state.ended = False
    else:
        client = redis.Redis.from_url(settings.CHATFORGE_EVENT_LOG_REDIS_URL)
        client.xdel(f"cf:run:{{{run_id}}}:events", f"0-{whole[-1]['seq']}")
        client.delete(f"cf:run:{{{run_id}}}:ended")

    events = collect(run_id, block_ms=100)

    assert events[:-1] == whole[:-1]
    rebuilt = events[-1]
    assert {k: v for k, v in rebuilt.items() if k != "ts"} == {k: v for k, v in whole[-1].items() if k != "ts"}


def test_a_run_that_publishes_while_the_reader_checks_it_is_not_taken_for_a_lost_log(engine, monkeypatch):
    """Regression: the reader looked at the log before the database, so a run
    that published between the two looks was served a snapshot instead of
    its events (seen in embedded mode, where runs are fast)."""
    from orchestration.services import run_follower

    run = start(engine)
    real_state = run_follower._run_state
    progressed = []

    def state_after_the_run_moved_on(run_id):
        if not progressed:  # the run executes its first turn right now
            progressed.append(first_turn(run))
        return real_state(run_id)

    monkeypatch.setattr(run_follower, "_run_state", state_after_the_run_moved_on)
    events = collect(str(run.id), limit=3)

    assert progressed, "the reader never checked the run: the race was not exercised"
    assert [e["type"] for e in events][:2] == ["run.started", "llm.started"]
    assert_rising(events)
