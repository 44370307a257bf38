"""What every event log backend guarantees.

- ``append`` gives each event of a run the next ``seq`` (1, 2, 3… with no
  gaps), atomically, whichever process appends.
- An event with a ``dedupe_key`` is appended at most once per run: a step
  that is delivered again can re-emit its events without duplicating them.
- After the terminal event nothing more is appended, so the terminal event is
  always the last one.
- ``read`` returns events with ``seq > after`` in order, waiting up to
  ``block_ms`` for new ones when there are none yet.
"""

from __future__ import annotations

from typing import Any, Protocol

Event = dict[str, Any]


class EventLog(Protocol):
    def append(
        self,
        run_id: str,
        event: Event,
        *,
        dedupe_key: str | None = None,
        terminal: bool = False,
    ) -> int | None:
        """Append ``event`` (without ``seq``); return its seq, or None if it
        was dropped (duplicate key, or the run's log is already closed)."""
        ...

    def read(self, run_id: str, *, after: int, block_ms: int = 0, count: int = 500) -> list[Event]:
        """Events with seq > after, each with its ``seq``; blocks when empty."""
        ...

    async def aread(
        self, run_id: str, *, after: int, block_ms: int = 0, count: int = 500
    ) -> list[Event]:
        """``read`` for async callers (websocket consumers, SSE views)."""
        ...
