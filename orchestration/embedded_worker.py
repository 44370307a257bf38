"""Embedded mode's Celery worker: threads inside the server process.

The broker is Kombu's in-memory transport, which is shared by every thread of
one process, so the web request that enqueues a step and the worker threads
that run it meet there. The worker is Celery's own ``WorkController`` (the
same consumer, acks and routing as a real worker), run on the threads pool in
a daemon thread, without the signal handlers a main-thread worker installs.
Stalled runs are swept by a small timer thread instead of ``celery beat``.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings

from chatforge.celery import app

from .services.sweeper import sweep_stalled_runs

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_started = False


def _sweep_forever(stop: threading.Event, interval_s: float) -> None:
    while not stop.wait(interval_s):
        try:
            sweep_stalled_runs()
        except Exception:
            logger.exception("sweeping stalled runs failed")


def start_embedded_worker() -> None:
    """Start the in-process worker once per process (idempotent)."""
    global _started
    if not settings.EMBEDDED:
        raise RuntimeError("The embedded worker runs only in embedded mode.")
    with _lock:
        if _started:
            return
        _started = True
    worker = app.WorkController(
        pool_cls="threads",
        concurrency=settings.CHATFORGE_EMBEDDED_WORKER_THREADS,
        queues=settings.CHATFORGE_QUEUES,
        without_heartbeat=True,
        without_mingle=True,
        without_gossip=True,
        loglevel=settings.LOG_LEVEL,
        hostname="embedded@localhost",
    )
    threading.Thread(target=worker.start, name="chatforge-embedded-worker", daemon=True).start()
    stop = threading.Event()
    interval = float(settings.CELERY_BEAT_SCHEDULE["sweep-stalled-runs"]["schedule"])
    threading.Thread(
        target=_sweep_forever, args=(stop, interval), name="chatforge-sweeper", daemon=True
    ).start()
    logger.info(
        "embedded worker started: %s threads on queues %s",
        settings.CHATFORGE_EMBEDDED_WORKER_THREADS, ", ".join(settings.CHATFORGE_QUEUES),
    )
