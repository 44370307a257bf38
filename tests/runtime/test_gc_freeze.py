"""A process freezes what it holds when ready for work, so full garbage
collections walk only what it made since (chatforge/runtime/gc_freeze.py),
and every full pass is timed in ``chatforge_gc_pause_seconds``."""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from chatforge.runtime import gc_freeze

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
    caplog.set_level(logging.INFO, logger="chatforge.runtime.gc_freeze")

    frozen = gc_freeze.freeze_startup_objects("test")

    # Django, DRF, Celery and the test's own modules: tens of thousands at least
    # (a frozen object whose last reference goes is still freed: the count can drop).
    assert frozen > 10_000
    assert 0 < gc.get_freeze_count() <= frozen
    # What a full pass walks now is what was made after the freeze.
    assert len(gc.get_objects(generation=2)) < 1_000
    [record] = [r for r in caplog.records if r.name == "chatforge.runtime.gc_freeze"]
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


def test_each_full_pass_is_timed_and_young_ones_are_not():
    gc_freeze.time_full_passes()
    gc_freeze.time_full_passes()
    assert sum(isinstance(cb, gc_freeze._FullPassTimer) for cb in gc.callbacks) == 1

    before = REGISTRY.get_sample_value(PAUSES) or 0.0
    gc.collect(0)
    gc.collect(1)
    assert (REGISTRY.get_sample_value(PAUSES) or 0.0) == before
    gc.collect()
    assert REGISTRY.get_sample_value(PAUSES) == before + 1
    assert REGISTRY.get_sample_value("chatforge_gc_pause_seconds_sum") > 0
