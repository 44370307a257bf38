"""Task events sent after the task starts, in batches, in the gevent, prefork and threads workers.

With ``-E`` every task makes the worker send ``task-received`` and
``task-started`` (then ``task-succeeded``) to the broker for Flower. The
prefork worker buffers them but sends the buffer on its event loop's next
turn; the gevent worker has no event loop, so Celery sends each at once,
in the path of the task: the message is read, ``task-received`` is published, the
task's greenlet starts, ``task-started`` is published, then the task runs
(Celery's own source notes that gevent "should actually buffer"). Measured
on the benchmark's stack, that put 0.7–0.9 ms into every model turn's wait
between the broker and the task (docs/performance.md).

This consumer step makes the gevent worker buffer its task events: an
event is queued, and a greenlet sends what has been queued
``FLUSH_DELAY_S`` later, in one message (``task.multi``, which
Flower and ``celery events`` read like the prefork worker's). Celery still
sends a full buffer (24 events) at once. Events reach Flower up to
``FLUSH_DELAY_S`` later; nothing else reads them. Worker events
(heartbeats, online/offline) are sent as before.

The prefork worker has an event loop, but Celery flushes its buffer on the
loop's next turn, so each event still went in a message of its own (2.5
messages per tool call, each a round trip from the loop that hands tasks
to the pool): it gets the same delay on its loop's timer.

The threads pool (the tools_io worker, decision 0025) has neither: Celery
publishes each event at once, from the consumer's thread (received) and
the task's (started, succeeded), a round trip to the broker in the path of
every tool call. It gets the same delay on a timer thread; the
dispatcher's own lock already serialises sends and flushes across threads.

Registered in ``chatforge/celery.py``; without effect when events are off.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from celery import bootsteps
from celery.events.dispatcher import EventDispatcher

logger = logging.getLogger(__name__)

FLUSH_DELAY_S = 0.05


class _Flusher:
    """Sends the dispatcher's buffered events once, ``FLUSH_DELAY_S`` after
    the first event queued since the last send; ``later(delay, fn)`` runs
    ``fn`` after ``delay`` in the worker's own way (a greenlet, or a timer
    of the prefork worker's event loop)."""

    def __init__(self, dispatcher: EventDispatcher, later: Callable[[float, Callable[[], None]], Any]) -> None:
        self.dispatcher = dispatcher
        self.later = later
        self.scheduled = False

    # In the threads pool two threads may both see ``scheduled`` false and
    # schedule a flush each: the second finds little or nothing to send.
    def schedule(self) -> None:
        if self.scheduled:
            return
        self.scheduled = True
        self.later(FLUSH_DELAY_S, self.flush)

    def flush(self) -> None:
        self.scheduled = False
        try:
            self.dispatcher.flush()
        except Exception as exc:  # monitoring only: a lost batch must not touch the tasks
            logger.warning("task events not sent (%s: %s)", type(exc).__name__, exc)


def _timer_later(delay: float, fn: Callable[[], None]) -> None:
    timer = threading.Timer(delay, fn)
    timer.daemon = True  # never holds up the worker's exit; shutdown flushes what is left
    timer.start()


def _greenlet_later(delay: float, fn: Callable[[], None]) -> None:
    import gevent  # only in the gevent worker, where it is loaded already

    gevent.spawn_later(delay, fn)


class BufferTaskEvents(bootsteps.StartStopStep):
    """After Celery's ``Events`` step (again after each reconnect, when it
    makes a new dispatcher): buffer the ``task`` group for ``FLUSH_DELAY_S``,
    in a green pool, on the prefork worker's event loop, or on a timer
    thread."""

    requires = ("celery.worker.consumer.events:Events",)

    def start(self, c: Any) -> None:
        dispatcher: EventDispatcher | None = c.event_dispatcher
        if dispatcher is None:
            return
        if c.hub is not None:
            later = c.hub.call_later
        elif getattr(c.pool, "is_green", False):
            later = _greenlet_later
        else:
            later = _timer_later  # the threads and solo pools
        flusher = _Flusher(dispatcher, later)
        dispatcher.buffer_group = frozenset({"task"})
        dispatcher.on_send_buffered = flusher.schedule
        self._flusher = flusher

    def shutdown(self, c: Any) -> None:
        flusher = getattr(self, "_flusher", None)
        if flusher is not None:
            flusher.flush()  # before Celery's Events step closes the dispatcher
