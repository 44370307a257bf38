"""The prefork worker's task events wait on its event loop's timer, the
threads worker's on a timer thread, and go in one message
(chatforge/workers/buffered_task_events.py): Celery flushed them on the
loop's next turn (prefork) or sent each at once (threads), one message per
event. A real kombu event
loop (``Hub``) and Celery's real event dispatcher, on kombu's in-memory
transport, where a queue bound to the events exchange counts the messages.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from kombu import Connection, Queue
from kombu.asynchronous import Hub

from chatforge.celery import app
from chatforge.workers import buffered_task_events
from chatforge.workers.buffered_task_events import FLUSH_DELAY_S, BufferTaskEvents

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


def _threads_worker(connection):
    dispatcher = app.events.Dispatcher(connection, hostname="tools-io@test", enabled=True)
    watched = Queue("watched-events", dispatcher.exchange, routing_key="#")
    watched(connection.default_channel).declare()
    worker = SimpleNamespace(event_dispatcher=dispatcher, hub=None, pool=SimpleNamespace(is_green=False))
    BufferTaskEvents(worker).start(worker)
    return dispatcher, watched


def test_a_threads_pool_workers_task_events_from_several_threads_go_in_one_message(monkeypatch):
    """The tools_io worker: events sent from several threads at once (the
    consumer's and the tasks'); the flush its timer would run sends them all."""
    timers: list = []
    monkeypatch.setattr(buffered_task_events, "_timer_later", lambda delay, fn: timers.append((delay, fn)))
    with Connection("memory://") as connection:
        dispatcher, watched = _threads_worker(connection)
        senders = [threading.Thread(target=lambda task=task: [dispatcher.send(kind, uuid=task) for kind in TASK_EVENTS])
                   for task in ("a", "b", "c")]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join()
        assert watched(connection.default_channel).get() is None  # nothing sent yet
        assert timers and timers[0][0] == FLUSH_DELAY_S

        timers[0][1]()
        message = watched(connection.default_channel).get(no_ack=True)
        assert sorted((event["uuid"], event["type"]) for event in message.decode()) == sorted(
            (task, kind) for task in ("a", "b", "c") for kind in TASK_EVENTS)  # one message, all nine
        assert watched(connection.default_channel).get() is None
        dispatcher.close()


def test_a_threads_pool_workers_timer_thread_sends_them():
    with Connection("memory://") as connection:
        dispatcher, watched = _threads_worker(connection)
        dispatcher.send("task-received", uuid="a")
        message = None
        deadline = time.monotonic() + 10
        while message is None and time.monotonic() < deadline:
            time.sleep(FLUSH_DELAY_S)
            message = watched(connection.default_channel).get(no_ack=True)
        assert message is not None and [event["type"] for event in message.decode()] == ["task-received"]
        dispatcher.close()
