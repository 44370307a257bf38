"""Re-enqueueing stalled runs.

A run whose heartbeat is older than CHATFORGE_RUN_STALL_S has lost its next
step (a worker died after committing but before enqueueing, or the broker
lost the message). A run with no heartbeat at all had its next step's
message refused by an unreachable broker (``dispatch.py``) and is sent again
at the next pass. When the broker was emptied (Redis restarted without its
data, or flushed: ``broker_loss.py``), every active run is looked at in the
next pass, whatever its heartbeat. The next step is derived from the
ledger and enqueued again; steps are idempotent, so a run that was merely
slow is not harmed.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from chatforge.conversations.models import LlmTurn, Run, ToolInvocation
from chatforge.observability import record
from chatforge.scheduling.limits import current_limits
from chatforge.scheduling.slots import call_step_id, scheduler, turn_step_id
from orchestration.event_log import events
from orchestration.queueing import broker_loss, dispatch

from .approvals import expire_overdue
from .finalize import Outcome, run_finalize
from .ledger import lock_run, ref, touch

logger = logging.getLogger(__name__)


def _lost(status: str, heartbeat_at, expired_before) -> bool:
    """A step is lost when it is pending (its message may be gone) or running
    under a lease nobody renewed; a fresh lease means a live worker has it."""
    return status == "pending" or heartbeat_at is None or heartbeat_at < expired_before


def run_redispatch(run_id: str) -> str:
    """Enqueue whatever the run needs next; returns what was done (for logs and tests)."""
    expired_before = timezone.now() - timedelta(seconds=settings.CHATFORGE_RUN_STALL_S)
    with transaction.atomic():
        run = lock_run(run_id)
        if run is None or run.is_terminal:
            return "nothing"
        if run.cancel_requested:
            transaction.on_commit(lambda: run_finalize(run_id=run_id, outcome=Outcome.CANCELLED))
            return "finalize"
        unfinished = list(
            ToolInvocation.objects.filter(run=run, iteration=run.iteration)
            .exclude(status__in=ToolInvocation.SETTLED)
            .values_list("tool_call_id", "name", "status", "heartbeat_at", "deliveries")
        )
        turn = LlmTurn.objects.filter(run=run, iteration=run.iteration).first()
        if unfinished:
            # A call awaiting approval is not lost: nothing is meant to run it until it is decided.
            lost = [(call_id, name) for call_id, name, status, beat, _ in unfinished
                    if status != ToolInvocation.Status.AWAITING_APPROVAL and _lost(status, beat, expired_before)]
            if not lost:
                return "alive"
            if all(_parked(call_step_id(run_id, call_id)) for call_id, _ in lost):
                return _still_parked(run)
            action = "tools"
            dispatch.tool_calls(run, [(call_id, name, 0) for call_id, name in lost])
            running = {call_id: deliveries for call_id, _, status, _, deliveries in unfinished
                       if status == ToolInvocation.Status.RUNNING}
            for call_id, _ in lost:
                if call_id in running:  # its worker was lost (not merely its queue message)
                    _tell_reconnecting(run, step="tool_call", tool_call_id=call_id, deliveries=running[call_id])
        elif turn is not None and turn.status == "completed" and not turn.tool_calls:
            transaction.on_commit(lambda: run_finalize(run_id=run_id, outcome=Outcome.COMPLETED))
            action = "finalize"
        elif turn is not None and not _lost(turn.status, turn.heartbeat_at, expired_before):
            return "alive"
        elif _parked(turn_step_id(run_id, run.iteration)):
            return _still_parked(run)
        else:
            dispatch.llm_turn(run, run.iteration)
            action = "llm_turn"
            if turn is not None and turn.status == "running":
                _tell_reconnecting(run, step="llm_turn", tool_call_id=None, deliveries=turn.deliveries)
        touch(run)
        run.save(update_fields=["heartbeat_at"])
        return action


RECONNECTING_REASON = "The worker running this step stopped answering; the step is being run again on another worker."


def _tell_reconnecting(run: Run, *, step: str, tool_call_id: str | None, deliveries: int) -> None:
    """``run.reconnecting`` for the run's clients, once the re-drive commits."""
    run_ref, iteration = ref(run), run.iteration
    transaction.on_commit(lambda: events.run_reconnecting(run_ref, iteration=iteration, step=step,
                                                          tool_call_id=tool_call_id, reason=RECONNECTING_REASON,
                                                          deliveries=deliveries))


def _parked(step_id: str) -> bool:
    """Whether the step waits in fair scheduling's line; with no cap set
    nothing does, and Redis is not asked."""
    return current_limits().caps_running_steps and scheduler().is_parked(step_id)


def _still_parked(run: Run) -> str:
    """Its next step waits for a free slot (fair scheduling), which is not
    a stall: looked at again after CHATFORGE_RUN_STALL_S."""
    touch(run)
    run.save(update_fields=["heartbeat_at"])
    return "parked"


def sweep_stalled_runs() -> int:
    """One pass: re-send the next step of stalled runs — or of every active
    run when the broker was emptied since the last pass (a Redis restart or
    flush loses every queued message at once; ``broker_loss.py``)."""
    expire_overdue()  # approval requests nobody answered in time are denied first
    try:
        dispatch.send_parked()  # slots whose lease lapsed (a dead worker's) go to the next in line
    except Exception as exc:
        logger.warning("sending parked steps failed (%s); the next pass tries again", exc)
    emptied = broker_loss.broker_was_emptied()
    active = Run.objects.filter(status__in=[Run.Status.QUEUED, Run.Status.RUNNING]).exclude(
        # waiting behind another run (double-texting): not stalled, just waiting
        blocked_by__status__in=[Run.Status.QUEUED, Run.Status.RUNNING],
    )
    if emptied:
        run_ids = list(active.values_list("id", flat=True))
        logger.warning("the broker lost what it held (restarted empty or flushed): "
                       "sending the next step of %d active runs again", len(run_ids))
    else:
        cutoff = timezone.now() - timedelta(seconds=settings.CHATFORGE_RUN_STALL_S)
        # No heartbeat at all: enqueueing its next step failed (dispatch.py).
        stalled = active.filter(Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True)).exclude(
            # Waiting for a person, not stalled: a decision sends its next step
            # (and touches the run, so a stall counts from there).
            Exists(ToolInvocation.objects.filter(run=OuterRef("pk"), status=ToolInvocation.Status.AWAITING_APPROVAL))
        )
        run_ids = list(stalled.values_list("id", flat=True)[:500])
    count = 0
    for run_id in run_ids:
        action = run_redispatch(str(run_id))
        if action in ("alive", "parked"):
            continue  # its step's lease is fresh: a live worker is on it
        logger.warning("%s run %s re-enqueued: %s", "active" if emptied else "stalled", run_id, action)
        record.sweeper_redrive(action)
        count += 1
    return count
