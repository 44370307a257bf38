"""Events published when a transaction commits, all in one round trip.

A step's transaction often decides several events at once (a model turn
asking for five tools publishes five ``tool_call`` events). Each was an
``on_commit`` callback and a Redis round trip of its own; here the events of
one transaction are collected and appended together by one callback
(``EventLog.append_many``: one pipeline in Redis), in the order they were
published, before any later ``on_commit`` work (the enqueues that follow
them).

The batch belongs to the transaction (and savepoint) that registered its
callback: if that rolls back, Django drops the callback with the batch's
events, and the next event starts a new batch instead of joining one that
will never be sent. An event published at another savepoint level than the
open batch starts a new batch too, so the order of events is kept and a
rolled-back savepoint takes exactly its own events with it. Outside a
transaction an event is published at once, as ``on_commit`` would.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import connection, transaction
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from orchestration.event_log import get_event_log
from orchestration.event_log.base import PendingAppend

logger = logging.getLogger(__name__)

_ATTRIBUTE = "_chatforge_event_batch"


@dataclass
class _Batch:
    savepoints: tuple[str, ...]  # where it was opened: its callback goes with them
    appends: list[PendingAppend] = field(default_factory=list)
    callback: Callable[[], None] | None = None

    def send(self) -> None:
        """Best effort: the state these events describe is committed, and the
        on-commit work after them (enqueueing the next steps) must still
        happen, so a log outage costs only these events. Readers rebuild a
        lost terminal event from the run's row and send a snapshot where the
        log itself was lost."""
        try:
            get_event_log().append_many(self.appends)
        except (RedisConnectionError, RedisTimeoutError) as exc:
            for append in self.appends:
                logger.error("run %s: %s event not published: the event log is unreachable (%s: %s)",
                             append.run_id, append.event.get("type"), type(exc).__name__, exc)


def _registered(batch: _Batch) -> bool:
    """Whether the batch's callback is still waiting for this connection's
    commit (Django drops callbacks of a rolled-back transaction)."""
    return any(entry[1] is batch.callback for entry in connection.run_on_commit)


def publish_on_commit(append: PendingAppend) -> None:
    """Append ``append`` to the event log once the current transaction commits."""
    if not connection.in_atomic_block:
        _Batch(savepoints=(), appends=[append]).send()
        return
    savepoints = tuple(connection.savepoint_ids)
    batch: _Batch | None = getattr(connection, _ATTRIBUTE, None)
    if batch is None or batch.savepoints != savepoints or not _registered(batch):
        batch = _Batch(savepoints=savepoints)
        batch.callback = batch.send
        setattr(connection, _ATTRIBUTE, batch)
        transaction.on_commit(batch.callback)
    batch.appends.append(append)
