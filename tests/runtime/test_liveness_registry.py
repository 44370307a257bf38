"""The liveness registry (chatforge/workers/liveness.py) on a redis-server of
its own: who is late, declaring a process lost once and telling it, the
watch going to one process per interval, and a Redis that has just
started trusted with nobody's loss."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from chatforge.workers.liveness import LivenessRegistry, owner_name
from tests.support.liveness import fresh_registry, wait_until_late
from tests.support.private_services import PrivateRedis, private_redis
from tests.support.stack import wait_for

LOST_S, INTERVAL_S = 0.3, 0.1


@pytest.fixture(scope="module")
def server() -> Iterator[PrivateRedis]:
    with private_redis() as started:
        yield started


@pytest.fixture
def registry(server: PrivateRedis) -> LivenessRegistry:
    return fresh_registry(server, lost_s=LOST_S, interval_s=INTERVAL_S)


def test_a_process_that_stops_renewing_is_late_and_one_that_renews_never_is(registry):
    alive, silent = owner_name("llm@a"), owner_name("llm@b")
    registry.renew(alive)
    registry.renew(silent)
    assert registry.lapsed() == []
    wait_until_late(registry, silent, renewing=alive)


def test_declaring_a_process_lost_tells_it_at_its_next_renewal_and_is_handed_out_until_settled(registry):
    alive, lost = owner_name("tools@a"), owner_name("tools@b")
    registry.renew(lost)
    wait_until_late(registry, lost, renewing=alive)

    assert registry.declare_lost(lost)
    assert not registry.renew(lost).alive  # back from a partition: told its steps were given away
    assert registry.renew(alive).alive
    # Not settled yet (its watcher could have died half-way): handed out again, until settled.
    assert registry.declare_lost(lost)
    registry.settle(lost)
    assert lost not in registry.lapsed() and not registry.declare_lost(lost)
    assert not registry.renew(lost).alive  # the tombstone outlives the settling


def test_lost_processes_whose_steps_were_not_settled_are_looked_at_again(registry):
    alive, lost = owner_name("tools@a"), owner_name("tools@b")
    registry.renew(lost)
    wait_until_late(registry, lost, renewing=alive)
    assert registry.declare_lost(lost)
    assert lost not in registry.lapsed()  # just declared: its watcher is at work
    wait_until_late(registry, lost, renewing=alive)  # not settled within the retry period: again


def test_a_process_that_renewed_since_it_was_found_late_is_not_declared_lost(registry):
    alive, slow = owner_name("llm@a"), owner_name("llm@b")
    registry.renew(slow)
    wait_until_late(registry, slow, renewing=alive)
    registry.renew(slow)  # it was only late
    assert not registry.declare_lost(slow)
    assert registry.renew(slow).alive


def test_the_watch_goes_to_one_process_per_interval_and_never_to_one_that_may_not_watch(registry):
    first, second, bystander = owner_name("llm@a"), owner_name("llm@b"), owner_name("llm@c")
    assert not registry.renew(bystander, may_watch=False).watcher
    assert registry.renew(first).watcher
    assert not registry.renew(second).watcher
    # Taken again once the interval's watch has lapsed.
    wait_for(lambda: registry.renew(second).watcher, timeout=10, what="the next interval's watch")
    assert not registry.renew(bystander, may_watch=False).watcher


def test_a_clean_stop_leaves_nothing_to_look_after(registry):
    alive, leaving = owner_name("llm@a"), owner_name("llm@b")
    registry.renew(leaving)
    registry.leave(leaving)
    deadline = time.monotonic() + 3 * LOST_S
    while time.monotonic() < deadline:  # longer than the lost threshold: it would be late by now
        registry.renew(alive)
        assert leaving not in registry.lapsed()


def test_a_redis_that_has_just_started_is_not_settled(registry):
    assert registry.settled_for(0)
    assert not registry.settled_for(3600)


def test_owner_names_are_unique_and_fit_a_postgres_application_name():
    names = {owner_name("tools@" + "h" * 200) for _ in range(50)}
    assert len(names) == 50 and all(len(name) <= 63 for name in names)
