"""One run's events for a client, from any seq, whatever happened to the log.

``run_events(run_id, after=N)`` yields every event with seq > N, then the
live ones, and ends after the terminal event. The websocket consumers, the
SSE view and ``manage.py chat`` all read through it. Where the log cannot
give the client what it asks for, a ``snapshot`` from Postgres stands in:

- the log is missing or trimmed so that seq N+1 is gone, but later events
  are there: a snapshot with seq (first seq held) − 1, then those events;
- the log is missing and the run has ended: a snapshot (N+1) and the
  terminal event rebuilt from the run row (N+2), then the end;
- the log is missing and the run is live: a snapshot (N+1) at once if the
  log had been written (the client saw events, or turn 0 got that far);
  the workers' next append starts a new log far above N (see
  ``orchestration/event_log/continuity.py``), which is then tailed;
- the log exists without a terminal event but the run has ended (the
  publish was lost): the terminal event rebuilt from the run row;
- the run's rows are gone (deleted) and the log holds no terminal event:
  a ``run.cancelled`` saying so, then the end.

Seqs a client sees therefore only rise. Redis blips are ridden over by
reading again from the same seq.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from channels.db import database_sync_to_async
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from chatforge.conversations.models import LlmTurn, Run
from chatforge.sql_rows import columns, db_param, fetch
from orchestration.event_log import get_event_log
from orchestration.event_log.base import Event, LogInfo
from orchestration.events import TERMINAL_TYPES

from .snapshots import SnapshotReason, snapshot_event, terminal_event, vanished_event

logger = logging.getLogger(__name__)

BLOCK_MS = 5000
MAX_READ_FAILURES = 30

T = TypeVar("T")


@dataclass(frozen=True)
class _RunState:
    run: Run
    log_was_written: bool  # the run's log must have existed (it got past its first event)


def _run_state(run_id: str) -> _RunState | None:
    """The run and whether its log was written, in one fixed statement:
    every socket reads it after each wait that brought no events."""
    rows = fetch(
        Run,
        f'SELECT {columns(Run, "r")}, t."deliveries", t."status" FROM {Run._meta.db_table} r '
        f'LEFT JOIN {LlmTurn._meta.db_table} t ON t."run_id" = r."id" AND t."iteration" = 0 '
        'WHERE r."id" = %s',
        [db_param(Run, "pk", run_id)],
    )
    if not rows:
        return None
    run, (deliveries, turn0_status) = rows[0]
    written = turn0_status is not None and (deliveries >= 2 or turn0_status == "completed")
    return _RunState(run=run, log_was_written=written or run.iteration > 0)


def _snapshot(run_id: str, seq: int, reason: SnapshotReason) -> Event | None:
    run = Run.objects.filter(pk=run_id).first()
    return snapshot_event(run, seq=seq, reason=reason) if run is not None else None


async def _retrying(what: str, run_id: str, call: Callable[[], Awaitable[T]]) -> T:
    """A Redis blip must not end the client's stream: wait and try again."""
    failures = 0
    while True:
        try:
            return await call()
        except (RedisConnectionError, RedisTimeoutError) as exc:
            failures += 1
            if failures > MAX_READ_FAILURES:
                raise
            logger.warning("%s of run %s failed (%s); retrying", what, run_id, exc)
            await asyncio.sleep(min(0.2 * failures, 2.0))


async def run_events(run_id: str, *, after: int = 0, block_ms: int = BLOCK_MS) -> AsyncIterator[Event]:
    log = get_event_log()
    cursor = max(0, after)
    restart_pending = False  # a snapshot stood in for a missing log; its next log may start anywhere above
    block = 0  # the first read does not wait, so a lost log is noticed at once
    conversation_id = ""  # known from the first event or row seen; a vanished run's end carries it
    while True:
        events = await _retrying(
            "reading events", run_id, lambda: log.aread(run_id, after=cursor, block_ms=block)
        )
        if events:
            first = events[0]["seq"]
            if first != cursor + 1:
                accepted = False
                if restart_pending:
                    info: LogInfo = await _retrying("inspecting the log", run_id, lambda: log.ainfo(run_id))
                    accepted = info.first_seq == first  # the new log, from its first event
                if not accepted:
                    snapshot = await database_sync_to_async(_snapshot)(run_id, first - 1, "events_missing")
                    if snapshot is None:
                        yield vanished_event(run_id, events[0].get("conversation_id", ""), seq=first - 1)
                        return
                    yield snapshot
            restart_pending = False
            for event in events:
                yield event
                cursor = event["seq"]
                conversation_id = event.get("conversation_id") or conversation_id
                if event["type"] in TERMINAL_TYPES:
                    return
            block = block_ms
            continue

        waited = block > 0
        block = block_ms
        # Postgres first, then the log: the engine publishes a run's events
        # before it commits the rows that show them written, so whatever the
        # database says happened is in the log by the time we look there.
        # (The other order raced: a fast run published in between and its
        # live log was taken for a lost one.)
        state = await database_sync_to_async(_run_state)(run_id)
        if state is None:  # deleted, and its log holds no terminal event
            yield vanished_event(run_id, conversation_id, seq=cursor + 1)
            return
        conversation_id = str(state.run.conversation_id)
        info = await _retrying("inspecting the log", run_id, lambda: log.ainfo(run_id))
        run = state.run
        if not info.exists:
            if run.is_terminal:
                yield await database_sync_to_async(snapshot_event)(run, seq=cursor + 1, reason="log_missing")
                yield await database_sync_to_async(terminal_event)(run, seq=cursor + 2)
                return
            if not restart_pending and (cursor > 0 or state.log_was_written):
                yield await database_sync_to_async(snapshot_event)(run, seq=cursor + 1, reason="log_missing")
                cursor += 1
                restart_pending = True
            # Otherwise the run has not published yet (or its log was lost
            # before the client saw anything): the next append creates it.
        elif run.is_terminal and waited and (info.last_seq or 0) <= cursor:
            if info.ended:
                return  # the client is past the terminal event already
            # The run ended but its terminal event never reached the log.
            yield await database_sync_to_async(terminal_event)(run, seq=cursor + 1)
            return
