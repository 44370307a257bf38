"""Task events sent after the task starts, in batches, in the gevent worker.

With ``-E`` every task makes the worker send ``task-received`` and
``task-started`` (then ``task-succeeded``) to the broker for Flower. The
prefork worker buffers them and sends them in batches from its event loop;
the gevent worker has no event loop, so Celery sends each at once, in the
path of the task: the message is read, ``task-received`` is published, the
task's greenlet starts, ``task-started`` is published, then the task runs
(Celery's own source notes that gevent "should actually buffer"). Measured
on the benchmark's stack, that put 0.7–0.9 ms into every model turn's wait
between the broker and the task (docs/performance.md).

This consumer step makes the gevent worker buffer its task events as the
prefork worker does: an event is queued, and a greenlet sends what has been
queued ``FLUSH_DELAY_S`` later, in one message (``task.multi``, which
Flower and ``celery events`` read like the prefork worker's). Celery still
sends a full buffer (24 events) at once. Events reach Flower up to
``FLUSH_DELAY_S`` later; nothing else reads them. Worker events
(heartbeats, online/offline) are sent as before.

Registered in ``chatforge/celery.py``; a no-op in the prefork and threads
pools and when events are off.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import bootsteps
from celery.events.dispatcher import EventDispatcher

logger = logging.getLogger(__name__)

FLUSH_DELAY_S = 0.05


class _Flusher:
    """Sends the dispatcher's buffered events once, ``FLUSH_DELAY_S`` after
    the first event queued since the last send."""

    def __init__(self, dispatcher: EventDispatcher) -> None:
        self.dispatcher = dispatcher
        self.scheduled = False

    def schedule(self) -> None:
        if self.scheduled:
            return
        import gevent  # only in the gevent worker, where it is loaded already

        self.scheduled = True
        gevent.spawn_later(FLUSH_DELAY_S, self.flush)

    def flush(self) -> None:
        self.scheduled = False
        try:
            self.dispatcher.flush()
        except Exception as exc:  # monitoring only: a lost batch must not touch the tasks
            logger.warning("task events not sent (%s: %s)", type(exc).__name__, exc)


class BufferTaskEvents(bootsteps.StartStopStep):
    """After Celery's ``Events`` step (again after each reconnect, when it
    makes a new dispatcher): buffer the ``task`` group in a green pool."""

    requires = ("celery.worker.consumer.events:Events",)

    def start(self, c: Any) -> None:
        dispatcher: EventDispatcher | None = c.event_dispatcher
        if dispatcher is None or c.hub is not None or not getattr(c.pool, "is_green", False):
            return
        flusher = _Flusher(dispatcher)
        dispatcher.buffer_group = frozenset({"task"})
        dispatcher.on_send_buffered = flusher.schedule
        self._flusher = flusher

    def shutdown(self, c: Any) -> None:
        flusher = getattr(self, "_flusher", None)
        if flusher is not None:
            flusher.flush()  # before Celery's Events step closes the dispatcher
