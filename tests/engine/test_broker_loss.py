"""A broker that lost everything it held: steps are sent straight to their
queues (no kombu binding is read, so a FLUSHDB cannot swallow a send), and
the next sweep after the broker was emptied sends the next step of every
active run at once, instead of waiting for their heartbeats to go stale.
Real Redis (the pytest process's own broker database, where no worker
listens) and the real engine; the integration tests in
tests/integration/test_redis_outage.py break a private Redis under real
workers."""

from __future__ import annotations

import pytest
from celery.signals import before_task_publish
from django.utils import timezone

from chatforge.celery import app
from chatforge.conversations.models import Conversation, LlmTurn, Run
from orchestration.queueing.broker_loss import MARKER_KEY
from orchestration.services.runs import RunOptions, run_start
from orchestration.services.sweeper import sweep_stalled_runs
from tests.conftest import QUEUES
from tests.engine.test_redelivery import enqueued

pytestmark = pytest.mark.django_db(transaction=True)


def new_run(user) -> Run:
    return run_start(user=user, conversation=Conversation.objects.create(user=user), content="What is 6*7?",
                     options=RunOptions(model="demo"))


def test_steps_go_straight_to_their_queue_without_kombu_bindings(idle_broker):
    bindings = idle_broker.keys("_kombu.binding*")
    if bindings:
        idle_broker.delete(*bindings)  # what a FLUSHDB does to them
    sent = []

    def record(exchange, routing_key, declare, headers, **kwargs):
        sent.append((headers["task"], exchange, routing_key, list(declare)))

    before_task_publish.connect(record, weak=False)
    try:
        for name in ("chatforge.llm_turn", "chatforge.tool_call", "chatforge.finalize_run", "chatforge.sweep_stalled_runs"):
            app.send_task(name, args=["00000000-0000-0000-0000-000000000000", 0])
    finally:
        before_task_publish.disconnect(record)

    assert sent == [
        ("chatforge.llm_turn", "", "llm", []),
        ("chatforge.tool_call", "", "tools", []),
        ("chatforge.finalize_run", "", "default", []),
        ("chatforge.sweep_stalled_runs", "", "default", []),
    ]
    assert [idle_broker.llen(queue) for queue in ("llm", "tools", "default")] == [1, 1, 2]
    assert idle_broker.keys("_kombu.binding*") == []  # nothing needed them, nothing made them again


def test_the_first_sweep_after_the_broker_was_emptied_sends_every_active_run(make_user, idle_broker):
    user, _ = make_user()
    waiting, running = new_run(user), new_run(user)
    # One run's first turn is being streamed by a live worker (fresh lease);
    # the other's waits in the queue.
    LlmTurn.objects.filter(run=running, iteration=0).update(status="running", deliveries=1,
                                                             heartbeat_at=timezone.now())
    idle_broker.delete(*QUEUES)  # the broker lost both messages
    assert sweep_stalled_runs() == 0  # heartbeats are fresh, and nothing says the broker was emptied

    idle_broker.delete(MARKER_KEY)  # Redis restarted empty, or was flushed
    assert sweep_stalled_runs() == 1
    assert enqueued(idle_broker) == [("chatforge.llm_turn", [str(waiting.id), 0])]
    assert idle_broker.exists(MARKER_KEY)

    idle_broker.delete(*QUEUES)
    assert sweep_stalled_runs() == 0  # one pass per loss
    assert enqueued(idle_broker) == []
