"""Concurrent appends of one process go to Redis together
(``orchestration/event_log/append_group.py``): each caller still gets its
own replies, errors reach every caller of the batch, and nothing — an
error, an interruption, a fork — leaves the group without a sender."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from django.conf import settings

from orchestration.event_log.append_group import AppendGroup

ROOT = Path(__file__).resolve().parents[2]


class Batches:
    """A ``send`` that answers each item with its double, slowly enough
    that callers arrive while a batch is out, and notes every batch."""

    def __init__(self, delay_s: float = 0.005, fail_with: BaseException | None = None) -> None:
        self.sent: list[list[int]] = []
        self.delay_s = delay_s
        self.fail_with = fail_with

    def __call__(self, items: list[int]) -> list[int]:
        self.sent.append(list(items))
        failure = self.fail_with  # as it was when this batch went out
        time.sleep(self.delay_s)
        if failure is not None:
            raise failure
        return [item * 2 for item in items]


class Interrupted(BaseException):
    """Stands for a time limit or a kill raised inside the sender."""


def run_threads(group: AppendGroup, submissions: list[list[int]]) -> list[object]:
    outcomes: list[object] = [None] * len(submissions)

    def submit(index: int) -> None:
        try:
            outcomes[index] = group.submit(submissions[index])
        except BaseException as exc:  # noqa: BLE001 - the test looks at what each caller got
            outcomes[index] = exc

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(len(submissions))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    return outcomes


def test_each_caller_gets_its_own_replies_from_fewer_sends():
    batches = Batches()
    group = AppendGroup(batches, interrupted=ConnectionError)
    submissions = [[i * 10 + j for j in range(i % 3 + 1)] for i in range(40)]
    outcomes = run_threads(group, submissions)
    assert outcomes == [[item * 2 for item in items] for items in submissions]
    assert len(batches.sent) < len(submissions)
    # Every item was sent once, a caller's items together and in order.
    assert sorted(item for batch in batches.sent for item in batch) == sorted(i for s in submissions for i in s)
    for items in submissions:
        assert any(batch[batch.index(items[0]) : batch.index(items[0]) + len(items)] == items
                   for batch in batches.sent if items[0] in batch)


def test_a_failed_send_reaches_every_caller_of_its_batch_and_the_group_goes_on():
    failing = Batches(fail_with=ConnectionError("Redis went away"))
    group = AppendGroup(failing, interrupted=ConnectionError)
    outcomes = run_threads(group, [[i] for i in range(10)])
    assert all(isinstance(outcome, ConnectionError) for outcome in outcomes)
    failing.fail_with = None
    assert group.submit([21]) == [42]


def test_an_interrupted_sender_keeps_its_interruption_and_the_others_get_a_connection_error():
    """The first batch is out; callers 1, 2, 3 queue behind it in that order,
    so 1 sends the next batch for all three, and is interrupted."""
    batches = Batches(delay_s=0.1)
    group = AppendGroup(batches, interrupted=ConnectionError)
    outcomes: dict[int, object] = {}

    def submit(item: int) -> None:
        if item == 1:
            batches.fail_with = Interrupted()  # the next send, the one caller 1 leads
        try:
            outcomes[item] = group.submit([item])
        except BaseException as exc:  # noqa: BLE001
            outcomes[item] = exc

    threads = []
    for item in range(4):
        threads.append(threading.Thread(target=submit, args=(item,)))
        threads[-1].start()
        time.sleep(0.02)
    for thread in threads:
        thread.join(timeout=30)
    assert batches.sent == [[0], [1, 2, 3]]
    assert outcomes[0] == [0]
    assert isinstance(outcomes[1], Interrupted)
    assert isinstance(outcomes[2], ConnectionError) and isinstance(outcomes[3], ConnectionError)
    batches.fail_with = None
    assert group.submit([5]) == [10]


def _submit_in_child(group: AppendGroup, out: multiprocessing.Queue) -> None:
    out.put(group.submit([4]))


def test_a_forked_child_does_not_wait_for_its_parents_sender():
    group = AppendGroup(Batches(), interrupted=ConnectionError)
    group._leading = True  # the parent forked while a batch of its was out
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=_submit_in_child, args=(group, out))
    child.start()
    child.join(timeout=30)
    assert child.exitcode == 0
    assert out.get(timeout=5) == [8]


@pytest.mark.timeout(120)
def test_greenlets_of_the_llm_worker_append_together_and_every_run_keeps_its_order():
    """The LLM worker's pool: 100 greenlets (gevent, monkey-patched as the
    worker is) each append 20 events to their own run on the real Redis;
    every run's seqs are 1…20 and the process sent far fewer pipelines
    than appends."""
    script = textwrap.dedent(
        f"""
        from gevent import monkey; monkey.patch_all()
        import gevent, uuid
        from orchestration.event_log.redis_stream import RedisStreamEventLog

        log = RedisStreamEventLog(url={settings.REDIS_URL!r}, active_ttl_s=60, ended_ttl_s=30, max_len=1000)
        sends = []
        send = log._group._send
        log._group._send = lambda items: sends.append(len(items)) or send(items)
        runs = [str(uuid.uuid4()) for _ in range(100)]

        def stream(run_id):
            for n in range(20):
                log.append(run_id, {{"type": "content.delta", "data": {{"text": str(n)}}}}, starts_log=n == 0)
                gevent.sleep(0.002)

        gevent.joinall([gevent.spawn(stream, run_id) for run_id in runs])
        ordered = all([e["seq"] for e in log.read(r, after=0, count=100)] == list(range(1, 21)) for r in runs)
        for run_id in runs:
            log.delete(run_id)
        print(ordered, len(sends), sum(sends))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=100)
    assert result.returncode == 0, result.stderr
    ordered, sends, appends = result.stdout.split()
    assert ordered == "True"
    assert int(appends) == 2000
    assert int(sends) < 1000
