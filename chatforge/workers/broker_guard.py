"""What workers and beat need to outlive their broker (Redis) restarting or
being wiped (decision 0011).

When a broker connection fails, kombu's ``Connection.collect()`` closes every
channel of the connection (``kombu/connection.py``, ``_do_close_self``) and
detaches the transport (``_do_close_transport`` sets ``transport.client =
None``); ``Connection.ensure``, which retries a failed send, does the same
before reconnecting. Whoever still holds one of those channels and uses it
later goes through the Redis channel, which builds a client from
``self.connection.client`` whenever its pool is gone
(``kombu/transport/redis.py``, ``Channel._connparams``):

- a channel whose close ran to its end has ``connection = None``:
  ``AttributeError: 'NoneType' object has no attribute 'client'``;
- a channel whose close stopped half-way (restoring its unacknowledged
  messages raised while Redis was down, so ``close_channel`` never detached
  it: ``kombu/transport/virtual/base.py``, ``Channel.close``) still points at
  the transport, whose ``client`` is ``None``; when it needs a new pool:
  ``AttributeError: 'NoneType' object has no attribute 'hostname'``.

An ``AttributeError`` is not a connection error, so nothing in kombu or
Celery reconnects or forgives it. Two holders matter to us:

- **A task's message**, acknowledged (or rejected) on the channel it came on
  when the step ends, after the connection was replaced.
  ``BrokerGuardedRequest`` logs and skips that: our steps are settled in
  Postgres, not by their message (decision 0002). A broker that restarted
  empty lost the message anyway; one that kept it hands it out again after
  the visibility timeout, a no-op for a finished step.
- **celery beat's producer**, cached for the life of the process:
  ``ReconnectingScheduler`` makes a new one after a failed send.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable

from celery import Task
from celery.beat import PersistentScheduler
from celery.exceptions import CPendingDeprecationWarning
from celery.signals import celeryd_after_setup
from celery.worker.request import Request

logger = logging.getLogger(__name__)


@celeryd_after_setup.connect(weak=False)
def _quiet_the_cancel_default_warning(**kwargs) -> None:
    """We turn worker_cancel_long_running_tasks_on_connection_loss off on
    purpose (settings/queues.py): a running step finishes and records itself
    whatever happens to its message. Celery warns on every connection loss
    that the default changes in Celery 6; ours is explicit, so that does not
    concern us. Installed after Celery's logging setup, which turns its
    pending-deprecation warnings to 'always' and would come first."""
    warnings.filterwarnings(
        "ignore",
        message=r"\s*In Celery 5.1 we introduced an optional breaking change which\s+on connection loss cancels",
        category=CPendingDeprecationWarning,
    )


def _channel_closed(request: Request) -> bool:
    channel = request.message.channel
    return channel is None or bool(getattr(channel, "closed", False)) or channel.connection is None


class BrokerGuardedRequest(Request):
    """A task request whose acknowledgement survives a lost broker connection."""

    def acknowledge(self) -> None:
        self._settle(super().acknowledge, "acknowledged")

    def reject(self, requeue: bool = False) -> None:
        self._settle(lambda: super(BrokerGuardedRequest, self).reject(requeue=requeue), "rejected")

    def _settle(self, settle: Callable[[], None], done: str) -> None:
        try:
            settle()
        except AttributeError:
            if not _channel_closed(self):
                raise
            logger.warning(
                "task %s[%s] not %s: the broker connection it came on was lost (the step's outcome is in "
                "the database; a broker that kept the message delivers it again, a no-op)",
                self.name, self.id, done,
            )
            self.acknowledged = True


class GuardedTask(Task):
    """The app's task class (``chatforge/celery.py``): every task's request is guarded."""

    Request = "chatforge.workers.broker_guard:BrokerGuardedRequest"


class ReconnectingScheduler(PersistentScheduler):
    """celery beat's scheduler (``CELERY_BEAT_SCHEDULER``), whose producer is
    made again after a send fails.

    Beat keeps one producer for its whole life (``Scheduler.producer`` is a
    cached property). When a send fails on a connection error, kombu's
    ``Connection.ensure`` closes the connection's channels — the producer's
    among them — and tries to reconnect; if the broker is still down, the
    send fails and the producer keeps its closed channel. Every later send
    then fails with ``AttributeError: 'NoneType' object has no attribute
    'client'``, which is not a connection error, so kombu never reconnects
    it: beat stayed up, logged the error every interval, and sent no sweep
    again until it was restarted. Dropping the producer after a failed send
    makes the next one on the reconnected connection."""

    def apply_async(self, entry, producer=None, advance=True, **kwargs):
        try:
            return super().apply_async(entry, producer=producer, advance=advance, **kwargs)
        except Exception:
            self.__dict__.pop("producer", None)
            raise
