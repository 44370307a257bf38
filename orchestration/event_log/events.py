"""The one module that publishes run events (the event protocol contract).

Each event type has a function here with its payload shape. Events about a
database change are published after the transaction commits (``on_commit``)
so a client never hears of a state the database does not hold; streaming
deltas are published at once. Events that a redelivered step may publish
again carry a dedupe key and reach the log once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from chatforge.errors.outages import DependencyUnavailable
from orchestration.event_log import commit_batch, get_event_log
from orchestration.event_log.base import PendingAppend
from orchestration.event_log.delta_coalescer import Delta

logger = logging.getLogger(__name__)


class EventLogUnavailable(DependencyUnavailable):
    """The event log (Redis) could not be reached, even after the client's own
    retries (redis-py retries a failed command ten times with backoff, riding
    over a blip of a few seconds). An infrastructure failure, never the
    model's or the tool's: the step is handed back to be run again
    (``claims.release_turn``, the task's retry, the sweeper), and clients get
    a snapshot from Postgres for whatever the log lost."""


@dataclass(frozen=True)
class RunRef:
    """What an event needs to know about its run, without a database read."""

    run_id: str
    conversation_id: str


def iso_timestamp(moment: datetime | None = None) -> str:
    """The events' time format (UTC, milliseconds, ``Z``); now when not given."""
    if moment is None:
        return _now()
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_second: tuple[int, str] = (-1, "")  # the last whole second formatted, and its text


def _now() -> str:
    """Now in the events' time format. Every streamed delta is stamped, so
    the date and time of the current second are formatted once (a quarter
    of the cost of ``datetime.isoformat`` each time)."""
    global _second
    now = time.time()
    second = int(now)
    cached = _second
    if cached[0] != second:
        cached = _second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{cached[1]}.{int((now - second) * 1000):03d}Z"


def _event(ref: RunRef, type_: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"type": type_, "run_id": ref.run_id, "conversation_id": ref.conversation_id, "ts": _now(), "data": data}


def _publish(
    ref: RunRef,
    type_: str,
    data: dict[str, Any],
    *,
    dedupe_key: str | None = None,
    terminal: bool = False,
) -> int | None:
    event = _event(ref, type_, data)
    with _log_reachable():
        return get_event_log().append(ref.run_id, event, dedupe_key=dedupe_key, terminal=terminal)


@contextmanager
def _log_reachable() -> Iterator[None]:
    """Redis connection failures as ``EventLogUnavailable``: an
    infrastructure failure the step is run again for, never the model's."""
    try:
        yield
    except (RedisConnectionError, RedisTimeoutError) as exc:
        raise EventLogUnavailable(f"the event log is unreachable ({type(exc).__name__}: {exc})") from exc


def _publish_best_effort(ref: RunRef, type_: str, data: dict[str, Any], **kwargs: Any) -> None:
    """For events about state already committed to Postgres: the state is safe
    and the steps after it must still happen (an on-commit callback that
    raised would skip the enqueue queued after it), so a log outage costs
    only this event. Readers rebuild a lost terminal event from the run's
    row, and send a snapshot where the log itself was lost."""
    try:
        _publish(ref, type_, data, **kwargs)
    except EventLogUnavailable as exc:
        logger.error("run %s: %s event not published: %s", ref.run_id, type_, exc)


def _publish_on_commit(ref: RunRef, type_: str, data: dict[str, Any], *, dedupe_key: str | None = None,
                       terminal: bool = False) -> None:
    """After the transaction commits, with the transaction's other events in
    one round trip (``commit_batch.py``)."""
    commit_batch.publish_on_commit(
        PendingAppend(run_id=ref.run_id, event=_event(ref, type_, data), dedupe_key=dedupe_key, terminal=terminal)
    )


def _run_started(ref: RunRef, message_id: str, first_delivery: bool) -> PendingAppend:
    return PendingAppend(
        run_id=ref.run_id,
        event=_event(ref, "run.started", {"conversation_id": ref.conversation_id, "message_id": message_id}),
        dedupe_key="run.started",
        starts_log=first_delivery,
    )


def _llm_started(ref: RunRef, iteration: int) -> PendingAppend:
    # Not deduplicated: a turn that is run again (its worker died) announces
    # itself again, telling clients to drop that iteration's partial text.
    return PendingAppend(run_id=ref.run_id, event=_event(ref, "llm.started", {"iteration": iteration}))


def turn_started(ref: RunRef, *, iteration: int, message_id: str, first_delivery: bool = False) -> None:
    """``llm.started``, after ``run.started`` for the run's first turn: one
    round trip to the event log for both. ``first_delivery``: published by
    the first delivery of turn 0, so ``run.started`` is the run's first
    event and its log may start at seq 1 without a check
    (event_log/continuity.py gives the same answer, for a query)."""
    appends = [_llm_started(ref, iteration)]
    if iteration == 0:
        appends.insert(0, _run_started(ref, message_id, first_delivery))
    _append_now(appends)


def _append_now(appends: list[PendingAppend]) -> None:
    with _log_reachable():
        get_event_log().append_many(appends)


def llm_retry(
    ref: RunRef, *, iteration: int, attempt: int, error: str, retry_in_s: float, discard_text: bool
) -> None:
    """A model turn failed transiently and will be tried again: clients drop
    the text this iteration streamed so far when ``discard_text``."""
    _publish(
        ref,
        "llm.retry",
        {"iteration": iteration, "attempt": attempt, "error": error, "retry_in_s": retry_in_s,
         "discard_text": discard_text},
    )


def run_reconnecting(ref: RunRef, *, iteration: int, step: str, tool_call_id: str | None, reason: str,
                     deliveries: int = 0) -> None:
    """The worker running a step of this run was lost (its liveness lapsed,
    or its lease ran out) and the step is being sent to another worker:
    clients show "Reconnecting the run…" until the run's next event. The
    step's new delivery announces itself as usual (``llm.started`` for a
    turn, whose partial text clients drop then; ``tool_output`` for a call).
    ``step`` is ``llm_turn`` or ``tool_call``; best effort (the re-drive
    matters, not this notice). Announced once per lost delivery
    (``deliveries``: the count the lost one had), however often it is re-driven."""
    _publish_best_effort(ref, "run.reconnecting",
                         {"iteration": iteration, "step": step, "tool_call_id": tool_call_id, "reason": reason},
                         dedupe_key=f"run.reconnecting:{step}:{iteration}:{tool_call_id or ''}:{deliveries}")


def content_delta(ref: RunRef, *, text: str) -> None:
    deltas([Delta(ref, "content", text)])


def reasoning_delta(ref: RunRef, *, text: str) -> None:
    deltas([Delta(ref, "reasoning", text)])


_DELTA_TYPES = {"content": "content.delta", "reasoning": "reasoning.delta"}


def deltas(batch: Sequence[Delta]) -> None:
    """``content.delta`` / ``reasoning.delta`` events of one or more turns
    (``Delta.target`` is the run's ``RunRef``), in one round trip: a turn's
    merged text, or every due turn's from the process's delta flusher
    (event_log/delta_coalescer.py)."""
    _append_now(
        [
            PendingAppend(run_id=d.target.run_id, event=_event(d.target, _DELTA_TYPES[d.kind], {"text": d.text}))
            for d in batch
        ]
    )


def tool_call(
    ref: RunRef, *, tool_call_id: str, name: str, arguments: str, iteration: int, text_offset: int,
    client: bool = False,
) -> None:
    """``client``: a call to a tool the /v1 client defined, which the server
    does not run (it carries ``"executor": "client"``; the run ends with it)."""
    _publish_on_commit(
        ref,
        "tool_call",
        {
            "id": tool_call_id,
            "name": name,
            "arguments": arguments,
            "iteration": iteration,
            "text_offset": text_offset,
            **({"executor": "client"} if client else {}),
        },
        dedupe_key=f"tool_call:{tool_call_id}",
    )


def tool_retry(ref: RunRef, *, tool_call_id: str, attempt: int, error: str) -> None:
    # Informational (the attempt is recorded on the invocation): a log outage
    # must not abort the tool between its attempts.
    _publish_best_effort(ref, "tool.retry", {"tool_call_id": tool_call_id, "attempt": attempt, "error": error})


def tool_output(
    ref: RunRef, *, tool_call_id: str, name: str, output: str, status: str, execution_time_ms: int,
    files: Sequence[dict[str, Any]] | None = None, cached: bool = False,
) -> None:
    """``files``: those the call saved to the conversation, ``[{id, name,
    content_type, kind, size}]``; the key is left out when it saved none.
    ``cached``: the output was served from the tool result cache, the tool
    did not run (docs/tools.md, "Caching"); ``"cached": true`` is sent only
    then, like ``files``, so the events of every other call are unchanged."""
    _publish_on_commit(
        ref,
        "tool_output",
        {
            "tool_call_id": tool_call_id,
            "name": name,
            "output": output,
            "status": status,
            "execution_time_ms": execution_time_ms,
            **({"files": list(files)} if files else {}),
            **({"cached": True} if cached else {}),
        },
        dedupe_key=f"tool_output:{tool_call_id}",
    )


def approval_required(
    ref: RunRef, *, tool_call_id: str, name: str, arguments: str, expires_at: str
) -> None:
    """A call waits for the run's owner to approve or deny it (nothing runs meanwhile)."""
    _publish_on_commit(
        ref,
        "approval.required",
        {"tool_call_id": tool_call_id, "name": name, "arguments": arguments, "expires_at": expires_at},
        dedupe_key=f"approval.required:{tool_call_id}",
    )


def approval_decided(
    ref: RunRef, *, tool_call_id: str, decision: str, reason: str, by: str | None, expired: bool = False
) -> None:
    """``by``: the deciding user's name; None when the server decided (``expired``)."""
    _publish_on_commit(
        ref,
        "approval.decided",
        {"tool_call_id": tool_call_id, "decision": decision, "reason": reason, "by": by, "expired": expired},
        dedupe_key=f"approval.decided:{tool_call_id}",
    )


def run_completed(
    ref: RunRef,
    *,
    message_id: str,
    finish_reason: str,
    usage: dict[str, int],
    max_iterations_reached: bool,
) -> None:
    _publish_on_commit(
        ref,
        "run.completed",
        {
            "message_id": message_id,
            "finish_reason": finish_reason,
            "usage": usage,
            "max_iterations_reached": max_iterations_reached,
        },
        terminal=True,
    )


def run_failed(ref: RunRef, *, error: str, message_id: str | None = None) -> None:
    _publish_on_commit(ref, "run.failed", {"error": error, "message_id": message_id}, terminal=True)


def run_cancelled(ref: RunRef, *, message_id: str | None = None) -> None:
    _publish_on_commit(ref, "run.cancelled", {"message_id": message_id}, terminal=True)


TERMINAL_TYPES = frozenset({"run.completed", "run.failed", "run.cancelled"})
