"""What every event log backend guarantees.

- ``append`` gives each event of a run the next ``seq`` (1, 2, 3… with no
  gaps), atomically, whichever process appends.
- An event with a ``dedupe_key`` is appended at most once per run: a step
  that is delivered again can re-emit its events without duplicating them.
- After the terminal event nothing more is appended, so the terminal event is
  always the last one.
- ``read`` returns events with ``seq > after`` in order, waiting up to
  ``block_ms`` for new ones when there are none yet.
- A log can be lost (expired, deleted, Redis wiped). When a run whose log
  was already written appends again, the new log does not restart at 1: it
  continues from a *floor* above every seq the lost log can have handed out
  (see ``continuity.py`` and docs/decisions/0006-snapshots.md), so a client
  never sees a seq twice or going backwards. ``info`` tells readers whether
  the log exists and which seqs it still holds, so they can send a snapshot
  from Postgres for what is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

Event = dict[str, Any]

# Decides, when a run's log is missing at append time, whether the log may
# (re)start at seq 1 — the run has never published — or must continue above
# a floor because an earlier log of this run was lost.
FreshLogPolicy = Callable[[str, Event], bool]


@dataclass(frozen=True)
class LogInfo:
    """What a run's log holds right now."""

    exists: bool
    first_seq: int | None = None  # oldest seq still in the log (trimming drops old ones)
    last_seq: int | None = None
    ended: bool = False  # the terminal event was appended


@dataclass(frozen=True)
class PendingAppend:
    """One append of a batch (``EventLog.append_many``)."""

    run_id: str
    event: Event
    dedupe_key: str | None = None
    terminal: bool = False
    starts_log: bool = False  # as ``append``'s


class EventLog(Protocol):
    def append(
        self,
        run_id: str,
        event: Event,
        *,
        dedupe_key: str | None = None,
        terminal: bool = False,
        starts_log: bool = False,
    ) -> int | None:
        """Append ``event`` (without ``seq``); return its seq, or None if it
        was dropped (duplicate key, or the run's log is already closed).
        ``starts_log``: the caller knows this is the run's first event, so a
        missing log starts at seq 1 without asking the fresh-log policy."""
        ...

    def append_many(self, appends: Sequence[PendingAppend]) -> list[int | None]:
        """``append`` of each, in order, in one round trip where the backend
        can (the events one transaction published); their seqs."""
        ...

    def read(self, run_id: str, *, after: int, block_ms: int = 0, count: int = 500) -> list[Event]:
        """Events with seq > after, each with its ``seq``; blocks when empty."""
        ...

    async def aread(
        self, run_id: str, *, after: int, block_ms: int = 0, count: int = 500
    ) -> list[Event]:
        """``read`` for async callers (websocket consumers, SSE views)."""
        ...

    def info(self, run_id: str) -> LogInfo:
        """Whether the run's log exists, the seqs it holds, whether it ended."""
        ...

    async def ainfo(self, run_id: str) -> LogInfo:
        """``info`` for async callers."""
        ...

    def delete(self, run_id: str) -> None:
        """Drop the run's log (tests and operators; readers then send snapshots)."""
        ...
