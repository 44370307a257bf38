"""An in-process event log for embedded mode (workers are threads here).

Same guarantees as the Redis backend within one process. Old runs are
forgotten after ``max_runs`` to bound memory in a long-lived dev server; a
run whose log was forgotten or deleted and publishes again gets a new log
that continues above a floor (microseconds since the epoch), as in Redis.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from .base import Event, FreshLogPolicy, LogInfo, PendingAppend


@dataclass
class _RunLog:
    base: int = 0  # seq of the first event is base + 1
    events: list[Event] = field(default_factory=list)
    dedupe: set[str] = field(default_factory=set)
    ended: bool = False


class InMemoryEventLog:
    def __init__(self, *, max_runs: int = 1000, may_start_fresh: FreshLogPolicy | None = None) -> None:
        self._runs: OrderedDict[str, _RunLog] = OrderedDict()
        self._max_runs = max_runs
        self._may_start_fresh = may_start_fresh or (lambda run_id, event: True)
        self._changed = threading.Condition()

    def append(
        self, run_id: str, event: Event, *, dedupe_key: str | None = None, terminal: bool = False,
        starts_log: bool = False,
    ) -> int | None:
        base = 0
        with self._changed:
            missing = run_id not in self._runs
        if missing and not starts_log and not self._may_start_fresh(run_id, event):  # a query: outside the lock
            base = time.time_ns() // 1000
        with self._changed:
            log = self._runs.get(run_id)
            if log is None:
                log = self._runs[run_id] = _RunLog(base=base)
                while len(self._runs) > self._max_runs:
                    self._runs.popitem(last=False)
            if log.ended:
                return None
            if dedupe_key is not None:
                if dedupe_key in log.dedupe:
                    return None
                log.dedupe.add(dedupe_key)
            seq = log.base + len(log.events) + 1
            log.events.append({"seq": seq, **event})
            log.ended = terminal
            self._changed.notify_all()
            return seq

    def append_many(self, appends: Sequence[PendingAppend]) -> list[int | None]:
        return [self.append(a.run_id, a.event, dedupe_key=a.dedupe_key, terminal=a.terminal, starts_log=a.starts_log)
                for a in appends]

    def read(self, run_id: str, *, after: int, block_ms: int = 0, count: int = 500) -> list[Event]:
        with self._changed:
            events = self._slice(run_id, after, count)
            if not events and block_ms:
                self._changed.wait_for(
                    lambda: bool(self._slice(run_id, after, 1)), timeout=block_ms / 1000
                )
                events = self._slice(run_id, after, count)
            return events

    async def aread(
        self, run_id: str, *, after: int, block_ms: int = 0, count: int = 500
    ) -> list[Event]:
        return await asyncio.to_thread(self.read, run_id, after=after, block_ms=block_ms, count=count)

    def info(self, run_id: str) -> LogInfo:
        with self._changed:
            log = self._runs.get(run_id)
            if log is None or not log.events:
                return LogInfo(exists=False)
            return LogInfo(
                exists=True, first_seq=log.events[0]["seq"], last_seq=log.events[-1]["seq"], ended=log.ended
            )

    async def ainfo(self, run_id: str) -> LogInfo:
        return self.info(run_id)  # never blocks for long: a lock and a lookup

    def delete(self, run_id: str) -> None:
        with self._changed:
            self._runs.pop(run_id, None)

    def _slice(self, run_id: str, after: int, count: int) -> list[Event]:
        log = self._runs.get(run_id)
        if log is None:
            return []
        start = max(0, after - log.base)
        return log.events[start : start + count]
