"""Ending a run: ONE transaction writes the assistant message (final text,
compact tool rounds, usage) and the run's final status; the terminal event is
published after it commits. Completion, failure, cancellation and the
iteration cap all end here, and running it twice changes nothing."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

from django.db import connection, transaction
from django.utils import timezone

from chatforge.conversations.models import Conversation, LlmTurn, Message, Run, ToolInvocation
from chatforge.conversations.selectors import ledger_invocations_read, ledger_turns_read
from chatforge.db.sql_rows import (
    Read,
    columns,
    db_param,
    fetch_together,
    insert_statement,
    instances,
    mark_saved,
    update_statement,
    write_together,
)
from chatforge.observability import record
from orchestration.event_log import events
from orchestration.queueing import dispatch
from orchestration.transcript.rounds import run_rounds

from .ledger import ref

logger = logging.getLogger(__name__)


class Outcome(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


_MESSAGE_STATUS = {
    Outcome.COMPLETED: Message.Status.FINAL,
    Outcome.FAILED: Message.Status.ERROR,
    Outcome.CANCELLED: Message.Status.CANCELLED,
}


def _sum_usage(turns: list[LlmTurn]) -> dict[str, int]:
    total: dict[str, int] = {}
    for turn in turns:
        for key, value in (turn.usage or {}).items():
            if isinstance(value, int):
                total[key] = total.get(key, 0) + value
    return total


def _publish_terminal(run: Run, message_id: str | None) -> None:
    r = ref(run)
    if run.status == Run.Status.COMPLETED:
        events.run_completed(
            r,
            message_id=message_id or "",
            finish_reason=run.finish_reason,
            usage=run.usage,
            max_iterations_reached=run.max_iterations_reached,
        )
    elif run.status == Run.Status.FAILED:
        events.run_failed(r, error=run.error, message_id=message_id)
    else:
        events.run_cancelled(r, message_id=message_id)


def _follow_the_answer(run: Run, answer: Message) -> tuple[str, list]:
    """The messages posted while ``run`` was active (double-texting) hung
    from its user message, as its answer was not written yet; now it is,
    they follow it, so that the branch is one chain (user, answer, user,
    answer) and their runs' models see this answer. One ``UPDATE`` chained
    with finalize's writes (decision 0037); the current leaf is not moved."""
    message, runs = Message._meta.db_table, Run._meta.db_table
    return (f'UPDATE {message} SET "parent_id" = %s WHERE "id" IN '
            f'(SELECT "user_message_id" FROM {runs} WHERE "blocked_by_id" = %s AND "status" = %s)',
            [db_param(Message, "id", answer.pk), db_param(Run, "id", run.pk), Run.Status.QUEUED.value])


def _waiting_runs(run_id):
    return Run.objects.filter(blocked_by_id=run_id, status=Run.Status.QUEUED)


@dataclass
class _Locked:
    recorded: bool  # the answering turn's record matched its row (True without one)
    run: Run | None
    turns: list[LlmTurn]
    invocations: list[ToolInvocation]


def _lock_run_with_its_ledger(run_id: str, recording: tuple[str, list] | None) -> _Locked:
    """The run, locked, and whether runs wait behind it (double-texting), in
    one statement: most runs have none, and then no second query is made;
    with the run's completed turns and its tool calls, read after the lock
    is taken, in the same round trip (``fetch_together``; on Postgres the
    transaction's ``BEGIN`` and ``recording``, the answering turn's own
    ``UPDATE``, go first in it). Fixed SQL (``chatforge.db.sql_rows``): the
    ORM's compiling of these reads cost more than the statements."""
    table = Run._meta.db_table
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    sql = f"""SELECT {columns(Run, "r")},
                     EXISTS (SELECT 1 FROM {table} w WHERE w."blocked_by_id" = r."id" AND w."status" = %s)
              FROM {table} r WHERE r."id" = %s{lock}"""
    writes = [Read(None, f"{recording[0]} RETURNING 1", recording[1])] if recording else []
    *written, found, turns, invocations = fetch_together(
        *writes,
        Read(Run, sql, [Run.Status.QUEUED.value, db_param(Run, "id", run_id)]),
        ledger_turns_read(run_id, completed_only=True),
        ledger_invocations_read(run_id),
    )
    recorded = bool(written[0]) if written else True
    if not found or not recorded:
        return _Locked(recorded, None, [], [])
    run, (waiting,) = found[0]
    run.has_waiting_runs = bool(waiting)
    return _Locked(recorded, run, instances(turns), instances(invocations))


def run_finalize(
    *, run_id: str, outcome: Outcome, error: str = "", error_kind: str = "", partial_text: str = "",
    recording: tuple[str, list] | None = None,
) -> bool:
    """End the run. ``error_kind``: the provider's kind of failure when the
    model refused (``Run.error_kind``). ``recording``: the answering turn's conditional
    ``UPDATE`` (``sql_rows.update_statement``), written in the same
    transaction and round trip as the run's lock; returns False, changing
    nothing, when it matched no row (another delivery recorded the turn)."""
    # No savepoint when nested: where a turn's answer is recorded in a
    # transaction of its own (llm_turns._record: a user with a token
    # budget), the run is ended in it too, and a failure undoes both.
    with transaction.atomic(savepoint=False):
        locked = _lock_run_with_its_ledger(run_id, recording)
        run, turns, invocations = locked.run, locked.turns, locked.invocations
        if run is None:
            return locked.recorded
        if run.is_terminal:
            # Delivered again: re-publish the terminal event in case the first
            # delivery died between commit and publish (the log keeps one).
            existing = Message.objects.filter(run=run, role=Message.Role.ASSISTANT).first()
            _publish_terminal(run, str(existing.id) if existing else None)
            return True
        _close_approval_requests(run, invocations)
        last = turns[-1] if turns else None
        final_turn = last if last is not None and (not last.tool_calls or _awaits_client(outcome, last, invocations)) else None
        text = final_turn.text if final_turn is not None else partial_text
        message = Message(
            conversation_id=run.conversation_id,
            run=run,
            parent_id=run.user_message_id,  # the answer follows the message it answers
            role=Message.Role.ASSISTANT,
            content=text,
            tool_rounds=run_rounds(run, turns, invocations),
            reasoning_tokens=(final_turn.usage or {}).get("reasoning_tokens") if final_turn else None,
            reasoning_details=final_turn.reasoning_details if final_turn else None,
            response_id=final_turn.response_id if final_turn else "",
            finish_reason=final_turn.finish_reason if final_turn else "",
            status=_MESSAGE_STATUS[outcome],
            model=run.model,
            usage=_sum_usage(turns),
        )
        now = timezone.now()
        run.status = Run.Status(outcome.value)
        run.error = error
        run.error_kind = error_kind
        run.finish_reason = message.finish_reason or outcome.value
        run.usage = message.usage
        run.max_iterations_reached = final_turn is not None and not final_turn.offered_tools and final_turn.iteration > 0
        run.finished_at = now
        run.heartbeat_at = now
        write_together(  # one round trip on Postgres
            insert_statement(message),
            update_statement(Run, {name: getattr(run, name) for name in (
                "status", "error", "error_kind", "finish_reason", "usage", "max_iterations_reached",
                "finished_at", "heartbeat_at")}, pk=run.pk),
            update_statement(Conversation, {"updated_at": now}, pk=run.conversation_id),
            *([_follow_the_answer(run, message)] if run.has_waiting_runs else []),
        )
        mark_saved([message])
        record.run_finished(run)
        _publish_terminal(run, str(message.id))
        # Runs posted while this one was active (double-texting) start now.
        if run.has_waiting_runs:
            for waiting in _waiting_runs(run_id).only("id", "user_id", "options", "created_at", "trace_parent"):
                dispatch.llm_turn(waiting, 0)
    logger.info("run %s ended: %s", run_id, outcome.value)
    return True


def _close_approval_requests(run: Run, invocations: list[ToolInvocation]) -> None:
    """Calls still awaiting approval when the run ends (cancelled, failed)
    are closed as cancelled, with a result that says why, so that nothing
    offers a decision on them any more."""
    waiting = [inv for inv in invocations if inv.status == ToolInvocation.Status.AWAITING_APPROVAL]
    if not waiting:
        return
    output = "Error: this call was waiting for the user's approval when the run ended; it was not run."
    ToolInvocation.objects.filter(pk__in=[inv.pk for inv in waiting]).update(
        status=ToolInvocation.Status.CANCELLED, output=output, finished_at=timezone.now())
    for inv in waiting:
        inv.status, inv.output = ToolInvocation.Status.CANCELLED, output


def _awaits_client(outcome: Outcome, last: LlmTurn, invocations: list[ToolInvocation]) -> bool:
    """A run that completes on a round that called the /v1 client's own tools:
    its answer is that turn (its text, ``finish_reason: "tool_calls"``), and
    the client runs the calls."""
    return outcome == Outcome.COMPLETED and any(
        inv.iteration == last.iteration and inv.status == ToolInvocation.Status.CLIENT for inv in invocations)


def step_must_stop(run: Run) -> bool:
    """Whether a step of ``run`` must not proceed: the run has ended, or it
    was asked to stop — in which case it is ended here, as cancelled."""
    if run.is_terminal:
        return True
    if run.cancel_requested:
        run_finalize(run_id=str(run.id), outcome=Outcome.CANCELLED)
        return True
    return False
