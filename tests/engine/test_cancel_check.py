"""The streaming loop's cancel check (orchestration/services/cancel_watch.py).

One query per process per interval answers for every turn streaming in it
(it was one query per turn per second: 21 % of a loaded LLM worker's CPU).
A database that does not answer skips one check instead of failing the turn,
which would restart the stream from its first chunk (clients saw the text
twice under load: bench/load.py with a pool timeout, decision 0012)."""

from __future__ import annotations

from contextlib import ExitStack

import pytest
from django.db import OperationalError, connection
from django.test.utils import CaptureQueriesContext

from chatforge.conversations.models import Conversation, Run
from orchestration.services import cancel_watch as module
from orchestration.services.cancel_watch import CancelWatch
from orchestration.services.runs import RunOptions, run_start

pytestmark = pytest.mark.django_db(transaction=True)


class _Unanswered:
    """Stands in for ``Run.objects``: the pool has no connection to give."""

    def filter(self, **kwargs):
        raise OperationalError("couldn't get a connection after 10.00 sec")


def _runs(make_user, count: int) -> list[str]:
    user, _ = make_user()
    return [
        str(run_start(user=user, conversation=Conversation.objects.create(user=user), content="hi",
                      options=RunOptions(model="demo")).id)
        for _ in range(count)
    ]


def test_an_unanswered_check_lets_the_stream_go_on(monkeypatch, caplog):
    watch = CancelWatch(interval_s=0)
    monkeypatch.setattr(module.Run, "objects", _Unanswered())
    with watch.watching("00000000-0000-0000-0000-000000000000"):
        assert watch.should_stop("00000000-0000-0000-0000-000000000000") is False
    assert "cancel check of 1 run(s) skipped" in caplog.text


def test_the_check_sees_a_cancel_and_a_deleted_run(make_user, idle_broker):
    watch = CancelWatch(interval_s=0)
    first, second = _runs(make_user, 2)
    with watch.watching(first), watch.watching(second):
        assert not watch.should_stop(first) and not watch.should_stop(second)
        Run.objects.filter(pk=first).update(cancel_requested=True)
        assert watch.should_stop(first) and not watch.should_stop(second)
        Conversation.objects.filter(runs__pk=second).delete()
        assert watch.should_stop(second)


def test_one_query_answers_every_turn_of_the_process(make_user, idle_broker):
    watch = CancelWatch(interval_s=60)
    run_ids = _runs(make_user, 5)
    Run.objects.filter(pk=run_ids[2]).update(cancel_requested=True)
    with ExitStack() as streaming, CaptureQueriesContext(connection) as queries:
        for run_id in run_ids:
            streaming.enter_context(watch.watching(run_id))
        answers = [watch.should_stop(run_id) for run_id in run_ids * 3]
    assert answers == [run_id == run_ids[2] for run_id in run_ids] * 3
    assert len(queries) == 1


def test_a_run_is_only_checked_while_a_turn_of_it_streams(make_user, idle_broker):
    watch = CancelWatch(interval_s=0)
    (run_id,) = _runs(make_user, 1)
    with watch.watching(run_id):
        with watch.watching(run_id):  # a second delivery of the same turn
            pass
        assert list(watch._watched) == [run_id]
    assert not watch._watched
    with CaptureQueriesContext(connection) as queries:
        assert watch.should_stop(run_id) is False
    assert len(queries) == 0
