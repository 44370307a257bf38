"""One follower for every reader of a run's events.

``follow_run(run_id, after=N)`` is an async iterator of the run's events
with seq > N, then the live ones, ending after the terminal event. Every
reader that follows a run to its end reads through it: the run and
conversation websockets and SSE (``chatforge/realtime/consumers.py``, ``sse.py``),
``/v1/chat/completions`` streamed or not (``chatforge/openai_api/views.py``),
``manage.py chat``, and the admin's model validation, which starts a run
and waits for its end (``wait_for_run_end``, for sync callers).

Why one: those readers used to follow the log each in its own way, with
their own retries of Redis errors and their own idea of the end when the
log could not give it — the sockets sent snapshots from Postgres, ``/v1``
asked Postgres whether the run had ended and made up a terminal event of
another shape, the validation polled the run's status between blocking
reads of its own (no shared ``XREAD``), and only the sockets noticed a log
lost and restarted mid-run. A fix to one (the race noted in ``_follow``, a lost
terminal event) did not reach the others, so the same run could end
differently depending on who watched it. Here there is one retry policy,
one fallback to Postgres and one read path: the waits go through
``EventLog.aread``, which in distributed mode is the event loop's shared
``StreamFollower`` (one ``XREAD`` per process, decision 0022). What differs
between readers — keepalives, timeouts, cancelling the run when a client
leaves, how an outage is reported (1013, a cut SSE stream, a 503 or an
error chunk) — stays with each reader.

Where the log cannot give the reader what it asks for, Postgres does
(``snapshots.py``; docs/events.md, "When the log is gone"):

- the log is missing or trimmed so that seq N+1 is gone, but later events
  are there: a snapshot with seq (first seq held) − 1, then those events;
- the log is missing and the run has ended: a snapshot (N+1) and the
  terminal event rebuilt from the run row (N+2), then the end;
- the log is missing and the run is live: a snapshot (N+1) at once if the
  log had been written (the reader saw events, or turn 0 got that far);
  the workers' next append starts a new log far above N (see
  ``orchestration/event_log/continuity.py``), which is then followed;
- the log exists without a terminal event but the run has ended (the
  publish was lost): the terminal event rebuilt from the run row;
- the run's rows are gone (deleted) and the log holds no terminal event:
  a ``run.cancelled`` saying so, then the end.

Seqs a reader sees therefore only rise, and every follow ends with exactly
one terminal event (unless the reader is already past it).

Outages: a Redis error while reading or inspecting the log is retried from
the same seq, backing off to 2 s, up to ``MAX_READ_FAILURES`` times in a
row (about a minute), then raised; ``RunFollower.outage`` is the error
being ridden over meanwhile. A database error is raised at once. Either
way the reader reports it as it does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from asgiref.sync import async_to_sync
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from chatforge.conversations.models import LlmTurn, Run
from chatforge.db.connections import db_sync_to_async
from chatforge.db.sql_rows import columns, db_param, fetch
from orchestration.event_log import get_event_log
from orchestration.event_log.base import Event, LogInfo
from orchestration.event_log.events import TERMINAL_TYPES

from .snapshots import SnapshotReason, snapshot_event, terminal_event, vanished_event

logger = logging.getLogger(__name__)

BLOCK_MS = 5000  # one wait on the log; after a wait that brought nothing, Postgres is asked
MAX_READ_FAILURES = 30  # Redis errors in a row ridden over before one is raised
RETRIED_ERRORS = (RedisConnectionError, RedisTimeoutError)

T = TypeVar("T")


@dataclass(frozen=True)
class _RunState:
    run: Run
    log_was_written: bool  # the run's log must have existed (it got past its first event)


def _run_state(run_id: str) -> _RunState | None:
    """The run and whether its log was written, in one fixed statement:
    every follower reads it after each wait that brought no events."""
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


async def _pause(failures: int) -> None:
    """The wait before trying again after ``failures`` Redis errors in a row."""
    await asyncio.sleep(min(0.2 * failures, 2.0))


class RunFollower:
    """An async iterator of one run's events (module docstring). With
    ``idle=True`` it also yields ``None`` after each read that brought
    nothing and did not end the run: a reader's chance to keep its client's
    connection alive. ``deadline`` (``time.monotonic()``) shortens the last
    waits so that none outlasts it; the caller enforces it."""

    def __init__(
        self,
        run_id: str,
        *,
        after: int = 0,
        block_ms: int = BLOCK_MS,
        idle: bool = False,
        deadline: float | None = None,
    ) -> None:
        self.run_id = run_id
        self.outage: BaseException | None = None  # the Redis error being retried right now
        self._block_ms = block_ms
        self._deadline = deadline
        self._events = self._follow(max(0, after), idle)

    def __aiter__(self) -> RunFollower:
        return self

    async def __anext__(self) -> Event | None:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        await self._events.aclose()

    def _wait_ms(self) -> int:
        if self._deadline is None:
            return self._block_ms
        left_ms = int((self._deadline - time.monotonic()) * 1000)
        return max(1, min(self._block_ms, left_ms))

    async def _retrying(self, what: str, call: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """A Redis blip must not end the follow: wait and try again."""
        failures = 0
        while True:
            try:
                result = await call(*args, **kwargs)
            except RETRIED_ERRORS as exc:
                failures += 1
                if failures > MAX_READ_FAILURES:
                    raise
                self.outage = exc
                logger.warning("%s of run %s failed (%s); retrying", what, self.run_id, exc)
                await _pause(failures)
                continue
            self.outage = None
            return result

    async def _follow(self, cursor: int, idle: bool) -> AsyncIterator[Event | None]:
        run_id = self.run_id
        log = get_event_log()
        restart_pending = False  # a snapshot stood in for a missing log; its next log may start anywhere above
        block = 0  # the first read does not wait, so a lost log is noticed at once
        conversation_id = ""  # known from the first event or row seen; a vanished run's end carries it
        while True:
            events = await self._retrying("reading events", log.aread, run_id, after=cursor, block_ms=block)
            if events:
                first = events[0]["seq"]
                if first != cursor + 1:
                    accepted = False
                    if restart_pending:
                        info: LogInfo = await self._retrying("inspecting the log", log.ainfo, run_id)
                        accepted = info.first_seq == first  # the new log, from its first event
                    if not accepted:
                        snapshot = await db_sync_to_async(_snapshot)(run_id, first - 1, "events_missing")
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
                block = self._wait_ms()
                continue

            waited = block > 0
            block = self._wait_ms()
            # Postgres first, then the log: the engine publishes a run's events
            # before it commits the rows that show them written, so whatever the
            # database says happened is in the log by the time we look there.
            # (The other order raced: a fast run published in between and its
            # live log was taken for a lost one.)
            state = await db_sync_to_async(_run_state)(run_id)
            if state is None:  # deleted, and its log holds no terminal event
                yield vanished_event(run_id, conversation_id, seq=cursor + 1)
                return
            conversation_id = str(state.run.conversation_id)
            info = await self._retrying("inspecting the log", log.ainfo, run_id)
            run = state.run
            if not info.exists:
                if run.is_terminal:
                    yield await db_sync_to_async(snapshot_event)(run, seq=cursor + 1, reason="log_missing")
                    yield await db_sync_to_async(terminal_event)(run, seq=cursor + 2)
                    return
                if not restart_pending and (cursor > 0 or state.log_was_written):
                    yield await db_sync_to_async(snapshot_event)(run, seq=cursor + 1, reason="log_missing")
                    cursor += 1
                    restart_pending = True
                # Otherwise the run has not published yet (or its log was lost
                # before the reader saw anything): the next append creates it.
            elif run.is_terminal and waited and (info.last_seq or 0) <= cursor:
                if info.ended:
                    return  # the reader is past the terminal event already
                # The run ended but its terminal event never reached the log.
                yield await db_sync_to_async(terminal_event)(run, seq=cursor + 1)
                return
            if idle:
                yield None


def follow_run(
    run_id: str, *, after: int = 0, block_ms: int = BLOCK_MS, idle: bool = False, deadline: float | None = None
) -> RunFollower:
    """The run's events with seq > ``after`` to its terminal event (``RunFollower``)."""
    return RunFollower(run_id, after=after, block_ms=block_ms, idle=idle, deadline=deadline)


async def _run_end(run_id: str, timeout_s: float) -> Event:
    follower = follow_run(run_id, deadline=time.monotonic() + timeout_s)
    limit = asyncio.timeout(timeout_s)
    try:
        async with limit:
            async for event in follower:
                if event is not None and event["type"] in TERMINAL_TYPES:
                    return event
    except TimeoutError:
        if limit.expired() and follower.outage is not None:
            raise follower.outage from None  # the log is unreachable: an outage, not a slow run
        raise
    finally:
        await follower.aclose()
    raise RuntimeError(f"the events of run {run_id} ended without a terminal event")  # followed from seq 0: a bug


def wait_for_run_end(run_id: str, *, timeout_s: float) -> Event:
    """For sync callers: follow the run from its first event and return its
    terminal event. ``TimeoutError`` when it has not ended within
    ``timeout_s`` — or, if the event log was unreachable at that moment,
    the Redis error being retried, as an outage is reported.

    Runs on the event loop above the caller when there is one (a sync view
    under ASGI: the web process's loop, so its shared ``XREAD``), else on a
    loop of its own; the database is reached from the calling thread
    either way (inside a caller's transaction, too)."""
    return async_to_sync(_run_end)(run_id, timeout_s)
