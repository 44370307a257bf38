"""A process freezes what it holds when ready for work, so full garbage
collections walk only what it made since (chatforge/observability/gc_freeze.py),
and every full pass is timed in ``chatforge_gc_pause_seconds``."""

from __future__ import annotations

import gc
import logging
import os
import time
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from chatforge.observability import gc_freeze, metrics

PAUSES = "chatforge_gc_pause_seconds_count"


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """Each test starts and ends with nothing frozen (importing the ASGI
    module in this process froze what it held then)."""
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_freezing_takes_what_the_process_holds_out_of_full_passes(unfrozen, settings, caplog):
    settings.CHATFORGE_GC_FREEZE = True
    caplog.set_level(logging.INFO, logger="chatforge.observability.gc_freeze")

    frozen = gc_freeze.freeze_startup_objects("test")

    # Django, DRF, Celery and the test's own modules: tens of thousands at least
    # (a frozen object whose last reference goes is still freed: the count can drop).
    assert frozen > 10_000
    assert 0 < gc.get_freeze_count() <= frozen
    # What a full pass walks now is what was made after the freeze.
    assert len(gc.get_objects(generation=2)) < 1_000
    [record] = [r for r in caplog.records if r.name == "chatforge.observability.gc_freeze"]
    assert (record.getMessage(), record.role, record.objects) == (
        "start-up objects frozen out of garbage collection", "test", frozen)


def test_objects_made_after_the_freeze_are_still_collected(unfrozen, settings):
    settings.CHATFORGE_GC_FREEZE = True
    gc_freeze.freeze_startup_objects("test")

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle only the collector frees
    del a, b
    assert gc.collect() >= 2


def test_off_freezes_nothing(unfrozen, settings):
    settings.CHATFORGE_GC_FREEZE = False
    assert gc_freeze.freeze_startup_objects("test") == 0
    assert gc.get_freeze_count() == 0


def test_the_timer_notes_full_passes_only():
    timer = gc_freeze._FullPassTimer()
    for generation in (0, 1):
        timer("start", {"generation": generation})
        timer("stop", {"generation": generation})
    assert not timer.pending
    timer("start", {"generation": 2})
    timer("stop", {"generation": 2})
    assert len(timer.pending) == 1 and timer.pending[0] >= 0


def _observed_after(before: float) -> float:
    """The pauses' count once it has moved past ``before`` (the process'
    flusher may observe them before the test's own flush does)."""
    deadline = time.monotonic() + 5 * gc_freeze.FLUSH_EVERY_S
    while (REGISTRY.get_sample_value(PAUSES) or 0.0) <= before and time.monotonic() < deadline:
        time.sleep(0.01)
    return REGISTRY.get_sample_value(PAUSES) or 0.0


def test_each_full_pass_is_observed_in_the_histogram():
    timer = gc_freeze.time_full_passes()
    assert gc_freeze.time_full_passes() is timer
    assert sum(isinstance(cb, gc_freeze._FullPassTimer) for cb in gc.callbacks) == 1

    before = REGISTRY.get_sample_value(PAUSES) or 0.0
    gc.collect()
    timer.flush()
    assert _observed_after(before) >= before + 1
    assert REGISTRY.get_sample_value("chatforge_gc_pause_seconds_sum") > 0


@pytest.mark.timeout(30)
def test_a_full_pass_inside_a_metrics_lock_does_not_wait_for_it():
    """A collection starts wherever an allocation tips it over, also inside
    prometheus-client holding a value's non-reentrant lock (in multiprocess
    mode one lock for every value). Observing from the callback deadlocked
    there; the callback only takes a note."""
    timer = gc_freeze.time_full_passes()
    before = REGISTRY.get_sample_value(PAUSES) or 0.0
    with metrics.GC_PAUSE._sum._lock:  # as held by an observe under way on this thread
        gc.collect()
    timer.flush()
    assert _observed_after(before) >= before + 1


def test_flushes_from_two_threads_observe_each_pause_once():
    """The process' flusher and a caller may flush at once: each pause is
    observed by one of them, and neither fails on an emptied deque."""
    import threading

    timer = gc_freeze._FullPassTimer()
    timer.pending.extend([0.001] * 1000)
    before = REGISTRY.get_sample_value(PAUSES) or 0.0
    counts: list[int] = []
    threads = [threading.Thread(target=lambda: counts.append(timer.flush())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(counts) == 1000 and not timer.pending
    assert (REGISTRY.get_sample_value(PAUSES) or 0.0) >= before + 1000


class _Worker:
    def __init__(self, pool_cls: str) -> None:
        self.pool_cls = pool_cls


def test_a_prefork_parent_starts_no_flusher_before_it_forks(unfrozen, monkeypatch):
    """A thread in the parent could hold prometheus-client's lock at a fork;
    the parent only freezes, its children time their own passes."""
    monkeypatch.setattr(gc_freeze, "_flusher_pid", None)
    gc_freeze._freeze_worker(sender=_Worker("celery.concurrency.prefork:TaskPool"))
    assert gc_freeze._flusher_pid is None
    assert gc.get_freeze_count() > 0

    gc_freeze._freeze_worker(sender=_Worker("celery.concurrency.gevent:TaskPool"))
    assert gc_freeze._flusher_pid == os.getpid()
