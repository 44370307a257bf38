"""Leases for running steps: one heartbeat thread per worker process.

While a step runs, its row's ``heartbeat_at`` (its lease) and its run's
heartbeat are renewed every CHATFORGE_HEARTBEAT_S by a single background
thread that touches every step running in this process with one UPDATE per
table. A step whose lease has gone stale belongs to a worker that died; a
live one is left alone by duplicate deliveries and by the sweeper.

One thread per process (started lazily, so prefork children each get their
own after the fork) instead of one per step keeps the cost to a few
statements per interval however many steps run. Between renewals the thread
holds no database connection: with a connection pool it gives its
connection back after each renewal, so a process's idle heartbeat never pins
one of the pool's few connections.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from django.utils import timezone

from chatforge.conversations.models import LlmTurn, Run, ToolInvocation
from chatforge.db.connections import release_connections
from chatforge.scheduling.limits import current_limits
from chatforge.scheduling.slots import call_step_id, scheduler, turn_step_id

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Step:
    run_id: str
    model: type[LlmTurn] | type[ToolInvocation]
    pk: int
    slot_id: str  # its name in the scheduler, whose slots are leases too


class _Heartbeater:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._steps: dict[int, _Step] = {}
        self._thread: threading.Thread | None = None
        self._pid: int | None = None

    @contextmanager
    def beating(self, step: _Step) -> Iterator[None]:
        key = id(step)
        with self._lock:
            self._steps[key] = step
            self._ensure_thread()
        try:
            yield
        finally:
            with self._lock:
                self._steps.pop(key, None)

    def _ensure_thread(self) -> None:
        if self._thread is not None and self._thread.is_alive() and self._pid == os.getpid():
            return
        self._pid = os.getpid()
        self._thread = threading.Thread(target=self._loop, name="chatforge-heartbeat", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        stop = threading.Event()
        while not stop.wait(settings.CHATFORGE_HEARTBEAT_S):
            with self._lock:
                steps = list(self._steps.values())
            if not steps:
                continue
            try:
                _renew(steps)
            except Exception:
                logger.exception("renewing step leases failed; retrying next interval")
                connection.close()  # a broken connection is replaced on next use
            else:
                release_connections()  # back to the pool until the next renewal


def _renew(steps: list[_Step]) -> None:
    # Steps first, then runs: a run's heartbeat is then never older than its
    # running steps' leases, so when the sweeper finds a run stale, the lease
    # of the step it re-enqueues has expired too and the new delivery takes it.
    now = timezone.now()
    for model in (LlmTurn, ToolInvocation):
        pks = [s.pk for s in steps if s.model is model]
        if pks:
            model.objects.filter(pk__in=pks, status="running").update(heartbeat_at=now)
    Run.objects.filter(pk__in={s.run_id for s in steps}).update(heartbeat_at=timezone.now())
    if not current_limits().caps_running_steps:
        return
    try:
        scheduler().renew([s.slot_id for s in steps])
    except Exception as exc:  # Redis away: slots lapse, at worst a cap is briefly exceeded
        logger.warning("renewing the steps' scheduler slots failed: %s", exc)


_heartbeater = _Heartbeater()


def step_lease(run_id: str, step: LlmTurn | ToolInvocation) -> AbstractContextManager[None]:
    """Keep ``step``'s lease (and its run's heartbeat) fresh for the block."""
    slot_id = (turn_step_id(run_id, step.iteration) if isinstance(step, LlmTurn)
               else call_step_id(run_id, step.tool_call_id))
    return _heartbeater.beating(_Step(run_id=run_id, model=type(step), pk=step.pk, slot_id=slot_id))
