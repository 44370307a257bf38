"""A process's start-up objects are taken out of the garbage collector's full passes.

Why: a ChatForge process holds a few hundred thousand objects that live as
long as it does (Django, DRF, Celery, the provider SDKs: about 400,000 in an
LLM worker). CPython's full collection (generation 2) walks every tracked
object, 157 ms per pass in an LLM worker on our 2-core host (measured),
and nothing else runs in the process meanwhile: every turn a gevent worker
streams and every socket a web process relays stops for it. Full passes
come whenever enough new objects have survived two younger collections,
which a streaming load makes happen again and again.

``gc.freeze()`` moves every object tracked at that moment into a permanent
generation that collections skip, so a full pass walks only what the
process made since. The price: cycles among the frozen objects are never
collected. We freeze once, when the process has finished starting (after
a collection, so start-up garbage is not kept), and the objects frozen are
the modules, classes and settings a process keeps until it exits anyway.

Where: the web process at the end of ``chatforge.asgi`` (after importing
the URLconf, so the views are frozen too); a Celery worker on
``worker_init``, when Django, the task modules and (in an LLM worker) the
provider SDKs are loaded and before a prefork pool forks its children; and
each prefork child when it starts. Freezing before the fork is what Python's
documentation advises for forking servers: a child's collections then never
write to the pages it shares with the parent. Measured, a prefork worker
with 4 children took 214 MB (PSS, all five processes) frozen before the
fork, 390 MB not frozen, and 445 MB when only the children froze (their
one collection copied every shared page it touched).
``CHATFORGE_GC_FREEZE=false`` turns it off. Full passes are timed in
``chatforge_gc_pause_seconds`` whether or not the setting is on, in every
process but a prefork parent (it runs no task; its children are timed).
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections import deque
from typing import Any

from celery.signals import worker_init, worker_process_init

from . import metrics

logger = logging.getLogger(__name__)

FULL_PASS = 2
FLUSH_EVERY_S = 1.0


def freeze_startup_objects(role: str) -> int:
    """Collect once, then freeze what is left: the number of objects frozen
    (0 when ``CHATFORGE_GC_FREEZE`` is off)."""
    from django.conf import settings

    if not settings.CHATFORGE_GC_FREEZE:
        return 0
    started = time.perf_counter()
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    logger.info(
        "start-up objects frozen out of garbage collection",
        extra={"role": role, "objects": frozen, "seconds": round(time.perf_counter() - started, 3)},
    )
    return frozen


class _FullPassTimer:
    """A ``gc.callbacks`` entry that notes how long each full pass took.

    A callback runs wherever a collection happens to start, possibly in the
    middle of code holding a lock — prometheus-client's values take a
    non-reentrant lock (one for all of them in multiprocess mode) — so it
    takes none: it only appends to a deque, and ``flush`` observes the
    notes into ``chatforge_gc_pause_seconds`` from ordinary code. Callbacks
    run for every collection; the young ones (hundreds a second under
    load) cost one comparison each here."""

    def __init__(self) -> None:
        self._started: float | None = None
        self.pending: deque[float] = deque(maxlen=1000)

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != FULL_PASS:
            return
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.pending.append(time.perf_counter() - self._started)
            self._started = None

    def flush(self) -> int:
        """Observe the pauses noted so far; how many there were."""
        flushed = 0
        while True:
            try:  # another thread may take the last note between a check and a pop
                pause = self.pending.popleft()
            except IndexError:
                return flushed
            metrics.GC_PAUSE.observe(pause)
            flushed += 1


_flusher_pid: int | None = None


def _flush_forever(timer: _FullPassTimer) -> None:
    while True:
        time.sleep(FLUSH_EVERY_S)
        try:
            timer.flush()
        except Exception:  # a metric that could not be written must not end the flusher
            logger.exception("could not record garbage-collection pauses")


def time_full_passes() -> _FullPassTimer:
    """Install the full-pass timer in this process (once), and the thread
    that observes its notes every ``FLUSH_EVERY_S`` (once per process: a
    forked child inherits the timer but not the parent's thread). Under
    gevent's patching the thread is a greenlet, which is all it needs."""
    global _flusher_pid
    timer = next((cb for cb in gc.callbacks if isinstance(cb, _FullPassTimer)), None)
    if timer is None:
        timer = _FullPassTimer()
        gc.callbacks.append(timer)
    if _flusher_pid != os.getpid():
        _flusher_pid = os.getpid()
        timer.pending.clear()  # in a forked child: the parent's pauses, not ours
        threading.Thread(target=_flush_forever, args=(timer,), name="gc-pause-metrics", daemon=True).start()
    return timer


def prepare_process(role: str, *, time_passes: bool = True) -> None:
    """What every long-lived process does once it has started."""
    if time_passes:
        time_full_passes()
    freeze_startup_objects(role)


@worker_init.connect
def _freeze_worker(sender: Any = None, **_: Any) -> None:
    # Connected after orchestration.worker_warmup's handlers (chatforge/celery.py
    # imports it first), so the provider SDKs it imports are frozen too. A
    # prefork parent runs no task and forks children for as long as it lives:
    # it starts no flusher thread, which could hold prometheus-client's lock
    # at a fork and leave a child waiting on it forever; each child times its
    # own passes (as tracing does, observability/celery_metrics.py).
    prefork = "prefork" in str(getattr(sender, "pool_cls", "prefork"))
    prepare_process("worker", time_passes=not prefork)


@worker_process_init.connect
def _freeze_prefork_child(**_: Any) -> None:
    prepare_process("worker child")
