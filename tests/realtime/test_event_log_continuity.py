"""A run's log that is lost and written again continues above a floor, so no
seq is handed out twice; a run's first event still starts its log at 1."""

from __future__ import annotations

import uuid

import pytest
from django.db import transaction

from chatforge.conversations.models import LlmTurn
from orchestration.event_log import events, get_event_log, reset_event_log
from tests.support.stepped_runs import first_turn

from .conftest import start

pytestmark = pytest.mark.django_db(transaction=True)

FLOOR = 10**15


def ref_of(run) -> events.RunRef:
    return events.RunRef(run_id=str(run.id), conversation_id=str(run.conversation_id))


def test_logs_of_unknown_runs_start_at_one_again(event_log):
    ref = events.RunRef(run_id=str(uuid.uuid4()), conversation_id="c")
    events.content_delta(ref, text="a")
    event_log.delete(ref.run_id)
    events.content_delta(ref, text="b")
    assert [e["seq"] for e in event_log.read(ref.run_id, after=0)] == [1]
    assert event_log.info(ref.run_id).first_seq == 1


def test_a_lost_log_of_a_started_run_continues_above_a_floor(engine, event_log):
    run = start(engine)
    first_turn(run)
    run_id = str(run.id)
    before = event_log.read(run_id, after=0)
    event_log.delete(run_id)
    assert not event_log.info(run_id).exists

    events.content_delta(ref_of(run), text="after the loss")
    events.content_delta(ref_of(run), text="and more")
    after = event_log.read(run_id, after=0)
    assert [e["seq"] for e in after][1] == after[0]["seq"] + 1
    assert after[0]["seq"] > FLOOR > before[-1]["seq"]
    info = event_log.info(run_id)
    assert (info.first_seq, info.last_seq, info.ended) == (after[0]["seq"], after[1]["seq"], False)

    # Lost again: the next floor is above everything the second log handed out.
    event_log.delete(run_id)
    events.content_delta(ref_of(run), text="third log")
    assert event_log.read(run_id, after=0)[0]["seq"] > after[-1]["seq"]


def test_run_started_of_the_first_delivery_starts_at_one_but_a_redelivery_does_not(engine, event_log):
    run = start(engine)
    LlmTurn.objects.filter(run=run, iteration=0).update(deliveries=1)
    events.turn_started(ref_of(run), iteration=0, message_id="m")
    assert [(e["seq"], e["type"]) for e in event_log.read(str(run.id), after=0)] == [
        (1, "run.started"), (2, "llm.started")]

    event_log.delete(str(run.id))
    LlmTurn.objects.filter(run=run, iteration=0).update(deliveries=2)
    events.turn_started(ref_of(run), iteration=0, message_id="m")
    again = event_log.read(str(run.id), after=0)
    assert [e["type"] for e in again] == ["run.started", "llm.started"]
    assert again[0]["seq"] > FLOOR and again[1]["seq"] == again[0]["seq"] + 1


def test_the_first_delivery_says_so_and_its_log_starts_with_no_query(engine, event_log,
                                                                       django_assert_num_queries):
    """Both start events go in one round trip to the event log."""
    run = start(engine)
    with django_assert_num_queries(0):
        events.turn_started(ref_of(run), iteration=0, message_id="m", first_delivery=True)
    assert [e["seq"] for e in event_log.read(str(run.id), after=0)] == [1, 2]


def test_a_later_turn_announces_only_itself(engine, event_log):
    run = start(engine)
    events.turn_started(ref_of(run), iteration=0, message_id="m", first_delivery=True)
    events.turn_started(ref_of(run), iteration=1, message_id="m")
    published = event_log.read(str(run.id), after=0)
    assert [(e["type"], e["data"]) for e in published][1:] == [("llm.started", {"iteration": 0}),
                                                               ("llm.started", {"iteration": 1})]


def test_a_run_cancelled_before_it_started_ends_its_log_at_one(engine, event_log):
    run = start(engine)  # turn 0 never claimed
    with transaction.atomic():
        events.run_cancelled(ref_of(run), message_id=None)
    (only,) = event_log.read(str(run.id), after=0)
    assert only["seq"] == 1 and event_log.info(str(run.id)).ended


@pytest.mark.parametrize("backend", ["redis", "memory"])
def test_the_configured_log_uses_the_policy(backend, settings):
    reset_event_log()
    settings.CHATFORGE_EVENT_LOG = backend
    try:
        assert get_event_log()._may_start_fresh.__name__ == "log_may_start_fresh"
    finally:
        reset_event_log()
