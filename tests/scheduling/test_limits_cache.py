"""The limits snapshot is refreshed by one caller while the others keep
using the previous one: nobody waits behind a refresh. A caller that waited
could be holding a pooled database connection while the refresher waits for
one from the same pool, and with every connection held that way the whole
worker stalled until the pool's timeout."""

from __future__ import annotations

import threading
import time

import pytest

from chatforge.scheduling import limits
from chatforge.scheduling.limits import Limits, UserLimit, current_limits


@pytest.fixture
def slow_load(monkeypatch):
    """``_load`` that holds its first caller until released."""
    release, entered, calls = threading.Event(), threading.Event(), []
    new = Limits(users={1: UserLimit(max_running_steps=2)}, assistants={}, tools={})

    def load() -> Limits:
        calls.append(threading.current_thread().name)
        if len(calls) == 1:
            entered.set()
            release.wait(30)
        return new

    monkeypatch.setattr(limits, "_load", load)
    yield release, entered, calls, new
    release.set()
    limits.forget_cached_limits()


def test_while_one_caller_refreshes_an_expired_snapshot_the_others_use_the_previous_one(slow_load):
    release, entered, calls, new = slow_load
    previous = Limits(users={}, assistants={}, tools={})
    limits._cached = (time.monotonic() - 10**6, previous)  # expired
    refresher = threading.Thread(target=current_limits, name="refresher")
    refresher.start()
    assert entered.wait(30)

    assert current_limits() is previous  # returned at once: the refresher is still loading
    assert refresher.is_alive() and calls == ["refresher"]

    release.set()
    refresher.join(30)
    assert current_limits() is new


def test_a_fresh_read_and_a_first_read_load_themselves(slow_load):
    release, _, calls, new = slow_load
    release.set()
    limits.forget_cached_limits()
    assert current_limits() is new  # nothing cached: loaded here
    assert current_limits(fresh=True) is new
    assert len(calls) == 2
