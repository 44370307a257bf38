"""Whether a streaming model turn should stop, asked once per process.

A turn looks at its run's cancel flag about every second while the model
streams, so that Stop (and deleting the conversation) ends the provider call
within a second. Asked by each turn on its own, that was one query per
streaming turn per second: with hundreds of turns in one gevent worker it
took 21 % of the worker's CPU, twice the publishing of the chunks
(bench/load.py, docs/performance.md). Here every turn streaming in a process
registers its run, and whichever turn asks first after the interval has
passed answers for all of them with one query; the others read the answer.

A database that cannot answer (an outage, a pool with no free connection)
leaves the previous answer in place, and the question is asked again at the
next interval: failing the turn would restart a healthy stream from its
first chunk, and clients would see that text twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DatabaseError

from chatforge.conversations.models import Run
from chatforge.db.connections import release_connections

logger = logging.getLogger(__name__)

# How often a process asks the database about the runs it streams.
CHECK_INTERVAL_S = 1.0


class CancelWatch:
    def __init__(self, interval_s: float = CHECK_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self._asking = threading.Lock()  # one query at a time (threads or greenlets)
        self._registry = threading.Lock()  # never held across a query
        self._watched: Counter[str] = Counter()  # run id -> turns of it streaming here
        self._stopping: frozenset[str] = frozenset()
        self._checked_at = float("-inf")

    @contextmanager
    def watching(self, run_id: str) -> Iterator[None]:
        """Include ``run_id`` in this process's checks while the block runs."""
        with self._registry:
            self._watched[run_id] += 1
        try:
            yield
        finally:
            with self._registry:
                self._watched[run_id] -= 1
                if self._watched[run_id] <= 0:
                    del self._watched[run_id]

    def should_stop(self, run_id: str) -> bool:
        """True when the run was asked to stop, or is gone (its conversation
        was deleted). At most one query per interval for the whole process;
        the caller that finds the answer stale pays for it."""
        if time.monotonic() - self._checked_at >= self.interval_s and self._asking.acquire(blocking=False):
            try:
                if time.monotonic() - self._checked_at >= self.interval_s:
                    self._refresh()
            finally:
                self._asking.release()
        return run_id in self._stopping

    def _refresh(self) -> None:
        with self._registry:
            run_ids = list(self._watched)
        self._checked_at = time.monotonic()  # also after a failure: asked again next interval
        if not run_ids:
            return
        try:
            flags = {str(pk): flag for pk, flag in
                     Run.objects.filter(pk__in=run_ids).values_list("pk", "cancel_requested")}
        except DatabaseError as exc:
            logger.warning("cancel check of %d run(s) skipped, the database did not answer (%s)",
                           len(run_ids), exc)
            return
        finally:
            release_connections()  # asked every second: straight back to the pool
        self._stopping = frozenset(run_id for run_id in run_ids if flags.get(run_id, True))


cancel_watch = CancelWatch()
