"""The prefork worker's task events wait on its event loop's timer and go
in one message (chatforge/runtime/buffered_task_events.py): Celery flushed
them on the loop's next turn, one message per event. A real kombu event
loop (``Hub``) and Celery's real event dispatcher, on kombu's in-memory
transport, where a queue bound to the events exchange counts the messages.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

from kombu import Connection, Queue
from kombu.asynchronous import Hub

from chatforge.celery import app
from chatforge.runtime.buffered_task_events import FLUSH_DELAY_S, BufferTaskEvents

TASK_EVENTS = ("task-received", "task-started", "task-succeeded")


def test_a_prefork_workers_task_events_go_together_after_the_delay():
    hub = Hub()
    with Connection("memory://") as connection:
        dispatcher = app.events.Dispatcher(connection, hostname="tools@test", enabled=True)
        watched = Queue("watched-events", dispatcher.exchange, routing_key="#")
        watched(connection.default_channel).declare()
        worker = SimpleNamespace(event_dispatcher=dispatcher, hub=hub, pool=SimpleNamespace(is_green=False))
        BufferTaskEvents(worker).start(worker)

        for kind in TASK_EVENTS:
            dispatcher.send(kind, uuid="a-task")
        assert watched(connection.default_channel).get() is None  # nothing sent yet

        time.sleep(FLUSH_DELAY_S * 2)
        hub.fire_timers(propagate=(Exception,))
        message = watched(connection.default_channel).get(no_ack=True)
        assert message is not None
        assert [event["type"] for event in message.decode()] == list(TASK_EVENTS)  # one message, all three
        assert watched(connection.default_channel).get() is None
        dispatcher.close()
    hub.close()


def test_a_threads_pool_worker_keeps_celerys_own_sending():
    dispatcher = SimpleNamespace(on_send_buffered="celery's", buffer_group=None)
    worker = SimpleNamespace(event_dispatcher=dispatcher, hub=None, pool=SimpleNamespace(is_green=False))
    BufferTaskEvents(worker).start(worker)
    assert dispatcher.on_send_buffered == "celery's" and dispatcher.buffer_group is None
