"""One run's events for a client, from any seq, whatever happened to the log.

``run_events(run_id, after=N)`` yields every event with seq > N, then the
live ones, and ends after the terminal event; a ``snapshot`` from Postgres
stands in where the log lost what the client asks for, and Redis blips are
ridden over by reading again from the same seq. The websocket consumers and
the SSE view read through it. It is the engine's run follower
(``orchestration/services/run_follower.py``), which every reader of a run's
events shares; what is the sockets' own (close codes, keepalives) stays in
``consumers.py``, ``managed_socket.py`` and ``sse.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from orchestration.event_log.base import Event
from orchestration.services.run_follower import BLOCK_MS, follow_run


def run_events(run_id: str, *, after: int = 0, block_ms: int = BLOCK_MS) -> AsyncIterator[Event]:
    return follow_run(run_id, after=after, block_ms=block_ms)
