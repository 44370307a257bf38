"""Leases for running steps, and this process's liveness.

Background threads per worker process (started at its start, or lazily
by its first claim, so prefork children each get their own after the
fork), whatever the number of steps:

- **Liveness** (every CHATFORGE_LIVENESS_S, 1 s): one Redis round trip
  renews the process's entry in the fleet's liveness registry
  (``chatforge/workers/liveness.py``). A process whose entry lapses for
  CHATFORGE_WORKER_LOST_S (3 s) is lost, and its steps are sent to another
  worker at once (``lost_workers.py``). The renewal also says when this
  process was itself declared lost (it was cut off, and the cut healed):
  the steps it claimed are then *fenced*, they stop and record nothing,
  since their new deliveries run them. (Which process claimed a step is on
  the step's row, ``lease_owner``, written by the claim: ``process_owner``.)
  It takes no database connection, so a Postgres outage never makes a live
  process look lost; and when this process is elected to look for lost
  ones, a thread of its own does it, so the renewals go on meanwhile.
- **Leases** (every CHATFORGE_HEARTBEAT_S, 10 s): one UPDATE per table
  touches every step running here (``heartbeat_at``) and their runs. The
  lease is the backstop where the registry cannot tell (embedded mode has
  no Redis; a Redis that lost its data): a lease older than
  CHATFORGE_RUN_STALL_S lets another delivery take the step. Between
  renewals the thread holds no database connection.

Database load stays what it was: liveness is in Redis, one write per
process per second, not one per step.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection
from django.utils import timezone

from chatforge.conversations.models import LlmTurn, Run, ToolInvocation
from chatforge.db.connections import release_connections
from chatforge.scheduling.limits import current_limits
from chatforge.scheduling.slots import call_step_id, scheduler, turn_step_id
from chatforge.workers.broker_client import broker_client
from chatforge.workers.liveness import LivenessRegistry, owner_name
from orchestration.queueing.worker_identity import current_worker_name

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class _Step:
    run_id: str
    model: type[LlmTurn] | type[ToolInvocation]
    pk: int
    slot_id: str  # its name in the scheduler, whose slots are leases too
    owner: str  # the process name its claim wrote (lease_owner)
    fenced: bool = False  # given to another delivery: stop, record nothing


class Lease:
    """A running step's hold on its work, for the step to ask whether it still
    has it. ``lost()`` costs nothing while this process renews its liveness
    on time; only when renewals are overdue (a partition, a stalled process)
    does it ask Redis first."""

    def __init__(self, step: _Step, heartbeater: _Heartbeater) -> None:
        self._step = step
        self._heartbeater = heartbeater

    def lost(self) -> bool:
        """True once the step was given to another delivery (this process was
        declared lost): stop without publishing or recording anything more."""
        if not self._step.fenced and self._heartbeater.overdue():
            self._heartbeater.confirm(wait=True)
        return self._step.fenced


@dataclass
class _Liveness:
    """This process's place in the registry."""

    owner: str
    node: str
    last_ok_sent: float = float("-inf")  # monotonic time the last successful renewal was sent
    last_attempt: float = float("-inf")  # monotonic time of the last renewal tried
    unbroken_since: float | None = None  # renewals on time since then (None: the last one failed)
    watching: threading.Event = field(default_factory=threading.Event)
    _registry: LivenessRegistry | None = None
    _made_for: tuple[object, float, float] | None = None

    def registry(self) -> LivenessRegistry | None:
        """The registry in the broker's Redis, as the app is configured now
        (tests point the app at another broker; a setting may change)."""
        client = broker_client()
        if client is None:
            return None
        made_for = (client, settings.CHATFORGE_WORKER_LOST_S, settings.CHATFORGE_LIVENESS_S)
        if self._registry is None or self._made_for != made_for:
            self._registry = LivenessRegistry(client, lost_s=made_for[1], interval_s=made_for[2])
            self._made_for = made_for
        return self._registry


class _Heartbeater:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._confirming = threading.Lock()
        self._steps: dict[int, _Step] = {}
        self._pid: int | None = None
        self._threads: list[threading.Thread] = []
        self._liveness: _Liveness | None = None
        self._node: str | None = None  # the Celery node, when the worker said it at start
        # What an elected process runs to look for lost ones (lost_workers.py,
        # given at the worker's start: it imports the engine's services, which
        # import this module). None: this process renews but never looks.
        self._watch: Callable[[LivenessRegistry], object] | None = None

    # -- steps ---------------------------------------------------------------

    @contextmanager
    def beating(self, step: _Step) -> Iterator[Lease]:
        key = id(step)
        with self._lock:
            self._ensure_threads()
            liveness = self._liveness
            if liveness is not None and step.owner and step.owner != liveness.owner:
                step.fenced = True  # claimed under the name this process had before it was declared lost
            self._steps[key] = step
        try:
            yield Lease(step, self)
        finally:
            with self._lock:
                self._steps.pop(key, None)

    def owner(self) -> str:
        """This process's name in the registry, for a claim to write; its
        threads start (and it enters the registry) first. Empty without a
        registry (embedded mode)."""
        with self._lock:
            self._ensure_threads()
            liveness = self._liveness
        if liveness is None:
            return ""
        if liveness.last_ok_sent == float("-inf"):
            self.confirm()  # in the registry before a step is claimed under its name
        return liveness.owner

    def _held(self) -> list[_Step]:
        with self._lock:
            return [step for step in self._steps.values() if not step.fenced]

    # -- threads -------------------------------------------------------------

    def _ensure_threads(self) -> None:
        """Under the lock. A forked child starts its own threads (and takes
        its own owner name: the parent's threads did not come with the fork)."""
        if self._pid == os.getpid() and all(thread.is_alive() for thread in self._threads):
            return
        self._pid = os.getpid()
        self._liveness = _new_liveness(self._node or current_worker_name())
        self._threads = [threading.Thread(target=self._lease_loop, name="chatforge-heartbeat", daemon=True)]
        if self._liveness is not None:
            _name_database_sessions(self._liveness.owner)
            self._threads += [
                threading.Thread(target=self._liveness_loop, name="chatforge-liveness", daemon=True),
                threading.Thread(target=self._watch_loop, name="chatforge-liveness-watch", daemon=True),
            ]
        for thread in self._threads:
            thread.start()

    def start(self, node: str, watch: Callable[[LivenessRegistry], object]) -> None:
        """Start the threads now (a worker process that has just started: it
        takes part in looking for lost workers, with ``watch``, before it
        runs any step)."""
        with self._lock:
            self._node, self._watch = node, watch
            self._ensure_threads()

    def leave(self) -> None:
        """The process stops cleanly: take it out of the registry."""
        liveness = self._liveness
        registry = liveness.registry() if liveness is not None and self._pid == os.getpid() else None
        if registry is None:
            return
        try:
            registry.leave(liveness.owner)
        except Exception as exc:  # Redis away: the entry lapses, and the process is declared lost (holding nothing)
            logger.warning("leaving the liveness registry failed (%s)", exc)

    def _lease_loop(self) -> None:
        stop = threading.Event()
        while not stop.wait(settings.CHATFORGE_HEARTBEAT_S):
            steps = self._held()
            if not steps:
                continue
            try:
                _renew(steps)
            except Exception:
                logger.exception("renewing step leases failed; retrying next interval")
                connection.close()  # a broken connection is replaced on next use
            else:
                release_connections()  # back to the pool until the next renewal

    def _liveness_loop(self) -> None:
        stop = threading.Event()
        while True:
            self.confirm()
            if stop.wait(settings.CHATFORGE_LIVENESS_S):
                return

    def _watch_loop(self) -> None:
        liveness = self._liveness
        assert liveness is not None
        while True:
            liveness.watching.wait()
            liveness.watching.clear()
            registry = liveness.registry()
            if self._watch is None or registry is None:
                continue
            try:
                self._watch(registry)
            except Exception:
                logger.exception("looking for lost workers failed; the next interval tries again")
                connection.close()
            finally:
                release_connections()

    # -- liveness ------------------------------------------------------------

    def overdue(self) -> bool:
        """Whether this process may have been declared lost: its last
        successful renewal was sent longer ago than the lost threshold."""
        liveness = self._liveness
        return (liveness is not None
                and time.monotonic() - liveness.last_ok_sent >= settings.CHATFORGE_WORKER_LOST_S)

    def confirm(self, *, wait: bool = False) -> None:
        """Renew this process's liveness now: the liveness thread's beat
        (which skips a beat while another renewal is under way), or, with
        ``wait``, a step that found renewals overdue and must know whether
        it was declared lost before it publishes more. A waiting step takes
        the answer of a renewal that ended meanwhile, and tries at most four
        times a second (Redis may be away: its events would not go out then
        either)."""
        liveness = self._liveness
        if liveness is None:
            return
        acquired = (self._confirming.acquire(timeout=2 * settings.CHATFORGE_LIVENESS_S) if wait
                    else self._confirming.acquire(blocking=False))
        if not acquired:
            return
        try:
            if wait and (not self.overdue() or time.monotonic() - liveness.last_attempt < 0.25):
                return
            self._renew_liveness(liveness)
        finally:
            self._confirming.release()

    def _renew_liveness(self, liveness: _Liveness) -> None:
        sent = liveness.last_attempt = time.monotonic()
        try:
            registry = liveness.registry()
            if registry is None:
                return
            renewal = registry.renew(liveness.owner, may_watch=self._watch is not None)
        except Exception as exc:  # Redis away: nobody can declare anyone lost meanwhile
            if liveness.unbroken_since is not None:
                logger.warning("renewing this worker's liveness failed (%s); retrying every %.1f s",
                               exc, settings.CHATFORGE_LIVENESS_S)
            liveness.unbroken_since = None
            return
        if not renewal.alive:
            self._fence(liveness)
            return
        late = sent - liveness.last_ok_sent > 2 * settings.CHATFORGE_LIVENESS_S  # a renewal was missed
        if liveness.unbroken_since is None or late:
            liveness.unbroken_since = sent
        liveness.last_ok_sent = sent
        # Look for lost workers only after renewing on time for a whole lost
        # threshold: right after an outage every process is late, this one too.
        if renewal.watcher and sent - liveness.unbroken_since >= settings.CHATFORGE_WORKER_LOST_S:
            liveness.watching.set()

    def _fence(self, liveness: _Liveness) -> None:
        """This process was declared lost while it could not renew: the steps
        it holds now belong to their new deliveries. It goes on under a new
        name (its old sessions were ended by the watcher)."""
        with self._lock:
            fenced = [step for step in self._steps.values() if not step.fenced and step.owner == liveness.owner]
            for step in fenced:
                step.fenced = True
            liveness.owner = owner_name(liveness.node)
            liveness.last_ok_sent = float("-inf")
            liveness.unbroken_since = None
        _name_database_sessions(liveness.owner)
        logger.warning("this worker was declared lost while it could not renew its liveness; %d step(s) it held "
                       "were given to other deliveries and stop here; going on as %s", len(fenced), liveness.owner)


def _new_liveness(node: str) -> _Liveness | None:
    """This process's liveness, where there is a Redis broker to keep it in
    (not in embedded mode, whose in-memory broker lives in this process)."""
    if broker_client() is None:
        return None
    return _Liveness(owner=owner_name(node), node=node)


def _name_database_sessions(owner: str) -> None:
    """Postgres sessions this process opens from now on carry its owner name
    as ``application_name`` (libpq reads PGAPPNAME at each connect), so the
    watcher can end them once it is lost: a session cut off mid-transaction
    would otherwise hold its row locks until idle_in_transaction_session_timeout."""
    os.environ["PGAPPNAME"] = owner


def _renew(steps: list[_Step]) -> None:
    # Steps first, then runs: a run's heartbeat is then never older than its
    # running steps' leases, so when the sweeper finds a run stale, the lease
    # of the step it re-enqueues has expired too and the new delivery takes it.
    # A lease the watcher released (heartbeat_at cleared: this process was
    # declared lost) is not taken back.
    now = timezone.now()
    for model in (LlmTurn, ToolInvocation):
        pks = [s.pk for s in steps if s.model is model]
        if pks:
            model.objects.filter(pk__in=pks, status="running", heartbeat_at__isnull=False).update(heartbeat_at=now)
    Run.objects.filter(pk__in={s.run_id for s in steps}).update(heartbeat_at=timezone.now())
    if not current_limits().caps_running_steps:
        return
    try:
        scheduler().renew([s.slot_id for s in steps])
    except Exception as exc:  # Redis away: slots lapse, at worst a cap is briefly exceeded
        logger.warning("renewing the steps' scheduler slots failed: %s", exc)


_heartbeater = _Heartbeater()


def step_lease(run_id: str, step: LlmTurn | ToolInvocation) -> AbstractContextManager[Lease]:
    """Keep ``step``'s lease (and its run's heartbeat) fresh for the block,
    and list it under this process's liveness; the block gets the ``Lease``."""
    slot_id = (turn_step_id(run_id, step.iteration) if isinstance(step, LlmTurn)
               else call_step_id(run_id, step.tool_call_id))
    return _heartbeater.beating(_Step(run_id=run_id, model=type(step), pk=step.pk, slot_id=slot_id,
                                      owner=step.lease_owner))


def process_owner() -> str:
    """The name a claim writes on the step (``lease_owner``): this process's
    in the liveness registry."""
    return _heartbeater.owner()


def start_worker_heartbeat(node: str, watch: Callable[[LivenessRegistry], object]) -> None:
    """At a worker process's start (``orchestration/worker_liveness.py``);
    ``node`` is its Celery node name (``llm@host-a``), ``watch`` what it runs
    when elected to look for lost processes (``lost_workers.py``)."""
    _heartbeater.start(node, watch)


def leave_liveness_registry() -> None:
    """At a worker process's clean stop."""
    _heartbeater.leave()
