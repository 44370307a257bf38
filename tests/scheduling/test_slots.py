"""The fleet-wide slots in Redis, driven directly: admission is atomic
across concurrent callers, parked steps are handed on in order when a slot
comes back, leases lapse and renew, and nothing is held for a step that
ended."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from django.conf import settings as django_settings

from chatforge.catalog.models import Assistant
from chatforge.scheduling.limits import forget_cached_limits
from chatforge.scheduling.slots import PREFIX, RedisSlots, StepSlot

# The sweeper's hand-off (``wake``) reads the caps in force from the admin's
# tables and settings: every user is capped at 1 here unless a test says otherwise.
pytestmark = pytest.mark.django_db


@pytest.fixture
def slots(settings) -> RedisSlots:
    client = redis.Redis.from_url(django_settings.CELERY_BROKER_URL)
    for key in client.scan_iter(PREFIX + "*"):
        client.delete(key)
    settings.CHATFORGE_HEARTBEAT_S = 0.1
    settings.CHATFORGE_RUN_STALL_S = 0.5  # slot leases lapse after this
    settings.CHATFORGE_USER_MAX_RUNNING_STEPS = 1
    forget_cached_limits()
    yield RedisSlots(client)
    forget_cached_limits()


def step(name: str, *scopes: tuple[str, int]) -> StepSlot:
    return StepSlot(name, tuple(scopes))


def admit(slots: RedisSlots, slot: StepSlot, place: float = 0.0) -> bool:
    return slots.admit(slot, run_id=f"run-{slot.step_id}", task="chatforge.llm_turn", args=[slot.step_id, 0],
                       place=int(place or time.time()))


def test_concurrent_admissions_never_exceed_the_cap(slots):
    admitted: list[str] = []
    start = threading.Barrier(20)

    def try_one(i: int) -> None:
        start.wait()
        if admit(slots, step(f"s{i}", ("user:1", 3))):
            admitted.append(f"s{i}")

    threads = [threading.Thread(target=try_one, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(admitted) == 3
    assert slots.running("user:1") == 3 and slots.parked("user:1") == 17


def test_a_release_hands_the_slot_to_the_oldest_parked_step(slots):
    assert admit(slots, step("a", ("user:1", 1)), place=100)
    assert not admit(slots, step("late", ("user:1", 1)), place=300)
    assert not admit(slots, step("early", ("user:1", 1)), place=200)  # an older run: ahead in line
    handed = slots.release("a")
    assert [h.args for h in handed] == [["early", 0]]
    assert handed[0].run_id == "run-early" and handed[0].task == "chatforge.llm_turn"
    assert slots.running("user:1") == 1 and slots.parked("user:1") == 1
    assert [h.args for h in slots.release("early")] == [["late", 0]]
    assert slots.release("late") == [] and slots.running("user:1") == 0


def test_a_step_waits_for_every_scope_and_others_pass_it(slots):
    """A call parked on its tool's cap does not block its user's other steps."""
    assert admit(slots, step("t1", ("user:1", 5), ("tool:paid", 1)))
    assert not admit(slots, step("t2", ("user:1", 5), ("tool:paid", 1)))
    assert admit(slots, step("other", ("user:1", 5)))  # room for the user: admitted past the parked call
    assert slots.release("other") == []  # the user's slot freed, but the tool is still full
    assert [h.args[0] for h in slots.release("t1")] == ["t2"]


def test_admission_is_idempotent_for_a_step_that_holds_its_slots(slots):
    assert admit(slots, step("a", ("user:1", 1)))
    assert admit(slots, step("a", ("user:1", 1)))  # sent again (the sweeper): it still holds the slot
    assert slots.running("user:1") == 1


def test_an_unlimited_step_touches_nothing(slots):
    assert admit(slots, step("free"))
    assert slots.release("free") == [] and slots.release("never-admitted") == []


def test_a_dead_workers_slot_lapses_and_wake_hands_it_on(slots):
    assert admit(slots, step("dead", ("user:1", 1)))
    assert not admit(slots, step("next", ("user:1", 1)))
    assert slots.wake() == []  # the lease is fresh: nothing to hand on
    time.sleep(0.6)
    assert [h.args[0] for h in slots.wake()] == ["next"]
    assert slots.running("user:1") == 1 and slots.parked("user:1") == 0


def test_renewal_keeps_a_running_steps_slot(slots):
    assert admit(slots, step("long", ("user:1", 1)))
    assert not admit(slots, step("next", ("user:1", 1)))
    for _ in range(4):
        time.sleep(0.25)
        slots.renew(["long"])
    assert slots.wake() == []  # 1 s later the renewed slot still holds
    assert slots.is_parked("next") and not slots.is_parked("long")
    slots.release("long")
    slots.renew(["long"])  # a renewal racing the release does not take the slot again
    assert slots.running("user:1") == 1  # "next" got it


def test_a_raised_cap_admits_more_at_the_sweepers_hand_off(slots):
    assert admit(slots, step("a", ("assistant:x", 1)))
    assert not admit(slots, step("b", ("assistant:x", 1)))
    assert not admit(slots, step("c", ("assistant:x", 1)))
    assert not admit(slots, step("d", ("assistant:x", 1)))
    Assistant.objects.create(name="x", max_running_steps=3)  # an admin raises the cap to 3
    forget_cached_limits()
    assert [h.args[0] for h in slots.wake()] == ["b", "c"]  # a, b and c now run
    assert slots.running("assistant:x") == 3 and slots.parked("assistant:x") == 1


def test_a_removed_cap_lets_every_parked_step_go(slots, settings):
    assert admit(slots, step("a", ("user:1", 1)))
    assert not admit(slots, step("b", ("user:1", 1)))
    assert not admit(slots, step("c", ("user:1", 1)))
    settings.CHATFORGE_USER_MAX_RUNNING_STEPS = 0  # no cap any more
    forget_cached_limits()
    assert sorted(h.args[0] for h in slots.wake()) == ["b", "c"]
    assert slots.parked("user:1") == 0
