"""A lost worker process's steps are sent on at once, and a process that was
declared lost stops what it claimed (orchestration/services/lost_workers.py,
orchestration/services/heartbeat.py).

Steps run in this process, against the pytest process's idle broker
(tests/conftest.py), where what the engine enqueues is counted and where
this process's own liveness is kept. The registries the watcher is given
here live on a redis-server of their own: a watcher on the idle broker
would also judge this process, whose renewals slow down when a test
changes the interval."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator

import pytest
from django.db import connection
from django.utils import timezone

from chatforge.conversations.models import LlmTurn, Message, Run, ToolInvocation
from chatforge.workers.liveness import LivenessRegistry, owner_name, tombstone_key
from orchestration import tasks
from orchestration.event_log import events, get_event_log
from orchestration.services import heartbeat
from orchestration.services.ledger import ref
from orchestration.services.lost_workers import redrive_lost_workers
from tests.conftest import QUEUES
from tests.engine.test_redelivery import engine, enqueued, new_run  # noqa: F401 - the fixture
from tests.fakes.openai_server import Reply
from tests.support.liveness import fresh_registry, wait_until_late
from tests.support.private_services import PrivateRedis, private_redis
from tests.support.stack import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

LOST_S, INTERVAL_S = 0.3, 0.1


@pytest.fixture(scope="module")
def watched() -> Iterator[PrivateRedis]:
    with private_redis() as server:
        yield server


@pytest.fixture
def registry(watched: PrivateRedis) -> LivenessRegistry:
    return fresh_registry(watched, lost_s=LOST_S, interval_s=INTERVAL_S)


@pytest.fixture
def quick_liveness(settings):
    settings.CHATFORGE_LIVENESS_S = INTERVAL_S
    settings.CHATFORGE_WORKER_LOST_S = LOST_S


def _types(run_id: str) -> list[str]:
    return [event["type"] for event in get_event_log().read(run_id, after=0)]


def _round_in_hand(user, broker) -> tuple[Run, ToolInvocation, ToolInvocation]:
    """A run whose first turn asked for two calls, both claimed by workers."""
    run = new_run(user, "redelivery")
    tasks.llm_turn(str(run.id), 0)
    broker.delete(*QUEUES)
    first, second = ToolInvocation.objects.filter(run=run).order_by("position")
    return run, first, second


def _claimed(inv: ToolInvocation, owner: str, deliveries: int = 1) -> None:
    ToolInvocation.objects.filter(pk=inv.pk).update(status="running", deliveries=deliveries,
                                                    heartbeat_at=timezone.now(), lease_owner=owner)


def test_the_calls_of_a_lost_process_are_sent_on_at_once_and_its_clients_told(engine, quick_liveness, registry):
    user, broker = engine
    run, lost_call, live_call = _round_in_hand(user, broker)
    run_id = str(run.id)
    lost, alive = owner_name("tools@gone"), owner_name("tools@here")
    _claimed(lost_call, lost)
    _claimed(live_call, alive)
    registry.renew(lost)
    wait_until_late(registry, lost, renewing=alive)

    assert redrive_lost_workers(registry) == 1

    lost_call.refresh_from_db()
    live_call.refresh_from_db()
    assert lost_call.status == "running" and lost_call.heartbeat_at is None  # free for the next delivery
    assert live_call.heartbeat_at is not None  # its worker is alive: untouched
    assert [args[1] for name, args in enqueued(broker) if name == "chatforge.tool_call"] == [lost_call.tool_call_id]
    notices = [e for e in get_event_log().read(run_id, after=0) if e["type"] == "run.reconnecting"]
    assert [(n["data"]["step"], n["data"]["tool_call_id"]) for n in notices] == [("tool_call", lost_call.tool_call_id)]
    assert not registry.renew(lost).alive  # should it come back, it is told
    assert lost not in registry.lapsed()  # settled

    tasks.tool_call(run_id, lost_call.tool_call_id)  # the new delivery
    lost_call.refresh_from_db()
    assert lost_call.status == "success" and lost_call.deliveries == 2


def test_a_call_another_delivery_has_taken_is_left_to_it(engine, quick_liveness, registry):
    user, broker = engine
    run, call, _ = _round_in_hand(user, broker)
    lost, successor = owner_name("tools@gone"), owner_name("tools@here")
    _claimed(call, successor, deliveries=2)  # taken over already (its lease ran out)
    registry.renew(lost)
    wait_until_late(registry, lost, renewing=successor)

    assert redrive_lost_workers(registry) == 0
    call.refresh_from_db()
    assert call.heartbeat_at is not None and call.lease_owner == successor
    assert "run.reconnecting" not in _types(str(run.id))


def test_a_streaming_turn_of_a_process_declared_lost_stops_and_records_nothing(engine, quick_liveness, fake_llm):
    user, broker = engine
    answer = " ".join(f"word{i}" for i in range(60))
    fake_llm.add_script("lost-while-streaming", [Reply(text=answer, chunk_delay_s=0.05)])
    run = new_run(user, "lost-while-streaming")
    run_id = str(run.id)
    declared: list[str] = []

    def declare_lost_mid_stream() -> None:
        # What the watcher leaves when it declares this process lost while
        # the turn streams (the process was cut off, and the cut healed).
        wait_for(lambda: "content.delta" in _types(run_id), timeout=30, what="the first delta")
        try:
            owner = LlmTurn.objects.get(run=run).lease_owner
        finally:
            connection.close()  # this thread's own, or the test database cannot be dropped
        broker.set(tombstone_key(owner), "1")
        declared.append(owner)

    declaring = threading.Thread(target=declare_lost_mid_stream)
    declaring.start()
    tasks.llm_turn(run_id, 0)
    declaring.join(30)

    turn = LlmTurn.objects.get(run=run)
    assert declared and turn.lease_owner == declared[0]
    assert turn.status == "running" and turn.deliveries == 1  # left for its new delivery
    assert not Message.objects.filter(run=run, role="assistant").exists()
    types = _types(run_id)
    assert not {"run.completed", "run.failed", "run.cancelled"} & set(types), types
    streamed = "".join(e["data"]["text"] for e in get_event_log().read(run_id, after=0) if e["type"] == "content.delta")
    assert streamed and streamed != answer  # stopped part-way
    assert heartbeat.process_owner() != declared[0]  # goes on under a new name

    # A step claimed under the old name stops before it starts.
    with heartbeat.step_lease(run_id, turn) as lease:
        assert lease.lost()


def test_what_a_lost_process_recorded_but_did_not_announce_is_announced_once(engine, quick_liveness, registry):
    # The process recorded its call (the commit reached Postgres) and was cut
    # off before it published the call's tool_output.
    user, broker = engine
    run, recorded, announced = _round_in_hand(user, broker)
    run_id = str(run.id)
    lost, alive = owner_name("tools@gone"), owner_name("tools@here")
    get_event_log().delete(run_id)  # as if the turn's events never went out either
    for call in (recorded, announced):
        ToolInvocation.objects.filter(pk=call.pk).update(
            status="success", deliveries=1, lease_owner=lost, output='{"ok": true}', duration_ms=5,
            result={"success": True, "result": {"ok": True}, "tool_name": call.name, "execution_time_ms": 5},
            finished_at=timezone.now())
    events.tool_output(ref(run), tool_call_id=announced.tool_call_id, name=announced.name, output='{"ok": true}',
                       status="success", execution_time_ms=5)
    LlmTurn.objects.filter(run=run, iteration=0).update(lease_owner=lost)  # its turn too: its calls were announced
    registry.renew(lost)
    wait_until_late(registry, lost, renewing=alive)

    redrive_lost_workers(registry)

    outputs = Counter(e["data"]["tool_call_id"] for e in get_event_log().read(run_id, after=0)
                      if e["type"] == "tool_output")
    assert outputs == {recorded.tool_call_id: 1, announced.tool_call_id: 1}
    calls = Counter(e["data"]["id"] for e in get_event_log().read(run_id, after=0) if e["type"] == "tool_call")
    assert calls == {recorded.tool_call_id: 1, announced.tool_call_id: 1}  # the turn's calls, announced again
    (again,) = [e for e in get_event_log().read(run_id, after=0)
                if e["type"] == "tool_output" and e["data"]["tool_call_id"] == recorded.tool_call_id]
    assert again["data"] == {"tool_call_id": recorded.tool_call_id, "name": recorded.name, "output": '{"ok": true}',
                             "status": "success", "execution_time_ms": 5}
