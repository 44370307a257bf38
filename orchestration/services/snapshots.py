"""Snapshots: a run's state read from Postgres, sent to a client in place of
events the log no longer has (expired, trimmed, lost with Redis), and the
terminal event rebuilt from the run row when the log's own is gone.

Postgres is the source of truth; the event log is transport. A snapshot
carries what the ledger knows: the run's status and iteration, the tool
rounds checkpointed so far, and the assistant message once the run ended.
The text a model turn is streaming right now is not stored until the turn
ends, so it is not in a snapshot (``partial_text`` is null); the events that
follow the snapshot continue from there.

The run follower (``run_follower.py``) sends these to every reader of a
run's events; they live in the engine with it because they read the ledger.
"""

from __future__ import annotations

from typing import Any, Literal

from chatforge.conversations.models import LlmTurn, Message, Run, ToolInvocation
from orchestration.event_log.base import Event
from orchestration.event_log.events import iso_timestamp
from orchestration.services.approvals import approval_decisions, pending_approvals
from orchestration.transcript.rounds import run_rounds

SnapshotReason = Literal["log_missing", "events_missing"]


def _rounds(run: Run) -> list[dict[str, Any]]:
    turns = list(LlmTurn.objects.filter(run=run))
    invocations = {inv.tool_call_id: inv for inv in ToolInvocation.objects.filter(run=run)}
    rounds = run_rounds(run, turns, invocations.values())
    if not run.is_terminal:
        # tool_rounds_from_ledger marks unfinished calls as cut off by the end
        # of the run; in a live run they are still pending or running.
        for rnd in rounds:
            for result in rnd["results"]:
                inv = invocations.get(result["tool_call_id"])
                if inv is not None and not inv.is_finished:
                    result.update(output="", status=inv.status, execution_time_ms=0)
    return list(rounds)


def _assistant_message(run: Run) -> Message | None:
    return Message.objects.filter(run=run, role=Message.Role.ASSISTANT).first()


def snapshot_event(run: Run, *, seq: int, reason: SnapshotReason) -> Event:
    """The ``snapshot`` event for ``run`` with this ``seq``."""
    message = _assistant_message(run) if run.is_terminal else None
    data: dict[str, Any] = {
        "status": run.status,
        "iteration": run.iteration,
        "error": run.error or None,
        "user_message_id": str(run.user_message_id),
        "message": None,
        "rounds": _rounds(run),
        "partial_text": None,  # the turn being streamed is stored only when it ends
        # Calls waiting for the owner's decision: still decidable after the log is gone.
        "pending_approvals": pending_approvals(run),
        # Calls decided already: the page shows a denied one as denied, not failed.
        "approvals": approval_decisions([run.id]).get(str(run.id), {}),
        "reason": reason,
    }
    if message is not None:
        data["message"] = {
            "id": str(message.id),
            "content": message.content,
            "tool_rounds": message.tool_rounds,
            "status": message.status,
            "finish_reason": message.finish_reason,
            "usage": message.usage,
        }
    return {
        "seq": seq,
        "type": "snapshot",
        "run_id": str(run.id),
        "conversation_id": str(run.conversation_id),
        "ts": iso_timestamp(),
        "data": data,
    }


def terminal_event(run: Run, *, seq: int) -> Event:
    """The terminal event of an ended run, rebuilt from Postgres with the
    payload finalize publishes (``orchestration/services/finalize.py``)."""
    if not run.is_terminal:
        raise ValueError(f"run {run.id} has not ended ({run.status})")
    message = _assistant_message(run)
    message_id = str(message.id) if message is not None else None
    data: dict[str, Any]
    if run.status == Run.Status.COMPLETED:
        type_ = "run.completed"
        data = {
            "message_id": message_id or "",
            "finish_reason": run.finish_reason,
            "usage": run.usage,
            "max_iterations_reached": run.max_iterations_reached,
        }
    elif run.status == Run.Status.FAILED:
        type_ = "run.failed"
        data = {"error": run.error, "message_id": message_id}
    else:
        type_ = "run.cancelled"
        data = {"message_id": message_id}
    return {
        "seq": seq,
        "type": type_,
        "run_id": str(run.id),
        "conversation_id": str(run.conversation_id),
        "ts": iso_timestamp(run.finished_at),
        "data": data,
    }


RUN_GONE = "The run no longer exists: its conversation was deleted."


def vanished_event(run_id: str, conversation_id: str, *, seq: int) -> Event:
    """The terminal event for a run whose rows are gone without a terminal
    event in its log (deleted with its conversation by an operator, say):
    followers get an end, not a stream that waits forever."""
    return {
        "seq": seq,
        "type": "run.cancelled",
        "run_id": run_id,
        "conversation_id": conversation_id,
        "ts": iso_timestamp(),
        "data": {"message_id": None, "reason": RUN_GONE},
    }
