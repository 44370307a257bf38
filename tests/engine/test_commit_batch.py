"""The events of one transaction reach the log together, after it commits,
in order; a rolled-back transaction or savepoint takes its events with it."""

from __future__ import annotations

import uuid

import pytest
from django.db import transaction

from orchestration.event_log import events, get_event_log, reset_event_log

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(params=["redis", "memory"])
def log_calls(request, settings, monkeypatch):
    settings.CHATFORGE_EVENT_LOG = request.param
    reset_event_log()
    log = get_event_log()
    batches: list[int] = []
    append_many = log.append_many

    def counted(appends):
        batches.append(len(appends))
        return append_many(appends)

    monkeypatch.setattr(log, "append_many", counted)
    yield log, batches
    reset_event_log()


def new_ref() -> events.RunRef:
    return events.RunRef(run_id=str(uuid.uuid4()), conversation_id=str(uuid.uuid4()))


def tool_call(ref: events.RunRef, n: int) -> None:
    events.tool_call(ref, tool_call_id=f"c{n}", name="echo", arguments="{}", iteration=0, text_offset=0)


def test_a_transactions_events_go_in_one_batch_after_commit(log_calls):
    log, batches = log_calls
    ref = new_ref()
    with transaction.atomic():
        for n in range(5):
            tool_call(ref, n)
        assert log.read(ref.run_id, after=0) == []  # nothing before the commit
    published = log.read(ref.run_id, after=0)
    assert [e["data"]["id"] for e in published] == ["c0", "c1", "c2", "c3", "c4"]
    assert [e["seq"] for e in published] == [1, 2, 3, 4, 5]
    assert batches == [5]


def test_a_rolled_back_transaction_publishes_nothing_and_the_next_one_publishes(log_calls):
    log, batches = log_calls
    ref = new_ref()
    with pytest.raises(RuntimeError), transaction.atomic():
        tool_call(ref, 0)
        raise RuntimeError("rolled back")
    with transaction.atomic():
        tool_call(ref, 1)
    assert [e["data"]["id"] for e in log.read(ref.run_id, after=0)] == ["c1"]
    assert batches == [1]


def test_a_rolled_back_savepoint_takes_only_its_own_events(log_calls):
    log, batches = log_calls
    ref = new_ref()
    with transaction.atomic():
        tool_call(ref, 0)
        with pytest.raises(RuntimeError), transaction.atomic():
            tool_call(ref, 1)
            raise RuntimeError("savepoint rolled back")
        tool_call(ref, 2)
        with transaction.atomic():
            tool_call(ref, 3)
        tool_call(ref, 4)
    assert [e["data"]["id"] for e in log.read(ref.run_id, after=0)] == ["c0", "c2", "c3", "c4"]


def test_outside_a_transaction_an_event_is_published_at_once(log_calls):
    log, batches = log_calls
    ref = new_ref()
    tool_call(ref, 0)
    assert [e["data"]["id"] for e in log.read(ref.run_id, after=0)] == ["c0"]


def test_a_duplicate_in_a_batch_is_dropped_by_its_dedupe_key(log_calls):
    log, _ = log_calls
    ref = new_ref()
    with transaction.atomic():
        tool_call(ref, 0)
        tool_call(ref, 0)
    assert [e["data"]["id"] for e in log.read(ref.run_id, after=0)] == ["c0"]


def test_a_batch_after_the_script_was_flushed_is_still_appended(settings):
    """Redis restarted (its script cache empty) between two batches; on a
    private redis-server, so the machine's shared one is not touched."""
    from tests.support.private_services import private_redis

    with private_redis() as server:
        settings.CHATFORGE_EVENT_LOG = "redis"
        settings.CHATFORGE_EVENT_LOG_REDIS_URL = server.url(0)
        reset_event_log()
        try:
            log = get_event_log()
            ref = new_ref()
            with transaction.atomic():
                tool_call(ref, 0)
            server.client().script_flush()
            with transaction.atomic():
                tool_call(ref, 1)
                tool_call(ref, 2)
            assert [e["data"]["id"] for e in log.read(ref.run_id, after=0)] == ["c0", "c1", "c2"]
        finally:
            reset_event_log()
