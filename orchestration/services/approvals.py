"""Human approval of tool calls: asking, deciding, and lapsing.

A call that needs approval is written as ``awaiting_approval`` by the turn
that asked for it and is not enqueued: no task, worker thread or process
waits for the answer, so a run can wait minutes (or survive restarts of
every process and of Redis) at no cost. The round's fan-in counts the call
as pending, so the next model turn starts only once it is decided and, if
approved, run.

A decision is one conditional write from ``awaiting_approval``, under a row
lock, so two decisions racing (two tabs, the REST API and the websocket)
cannot both apply: the second sees the first and is a no-op if it agrees,
a 409 if it does not. Approve → the call becomes ``pending`` and is
enqueued like any other; deny → it is recorded as an error result the model
reads (tool_steps.record_result, which also does the fan-in). A request not
decided within CHATFORGE_APPROVAL_TIMEOUT_S is denied by the sweeper.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from chatforge.conversations.models import Run, ToolInvocation
from chatforge.errors import DecisionConflict, NotFound
from chatforge.observability import record
from orchestration.event_log import events
from orchestration.queueing import dispatch
from tools.executor import ToolResult

from .approval_policy import declined_output, expired_output
from .ledger import ref
from .tool_steps import record_result

logger = logging.getLogger(__name__)

AWAITING = ToolInvocation.Status.AWAITING_APPROVAL
Decision = ToolInvocation.Decision
_PAST = {Decision.APPROVE: "approved", Decision.DENY: "denied"}


def iso(moment: datetime | None) -> str | None:
    return events.iso_timestamp(moment) if moment is not None else None


def pending_approvals(run: Run) -> list[dict]:
    """The run's calls awaiting a decision, as ``approval.required`` carries
    them (snapshots show these when the events are gone)."""
    if run.is_terminal:
        return []
    waiting = ToolInvocation.objects.filter(run=run, status=AWAITING).order_by("iteration", "position")
    return [{"tool_call_id": inv.tool_call_id, "name": inv.name, "arguments": inv.arguments,
             "expires_at": iso(inv.approval_expires_at)} for inv in waiting]


def approval_decisions(run_ids: list) -> dict[str, dict[str, dict]]:
    """The decisions on the runs' calls that asked for approval, by run id
    then tool call id: ``{decision, reason, by, expired}`` (one query), as
    the runs' ``approval.decided`` events told them. A stored round and a
    snapshot hold only a call's result, and a denied call's result is an
    error the model reads, which the page shows as *denied*, with who
    decided, not as a failure (chatforge/web/pages.py, snapshots.py)."""
    decided = ToolInvocation.objects.filter(run_id__in=run_ids).exclude(approval_decision="").values_list(
        "run_id", "tool_call_id", "approval_decision", "approval_reason", "approval_decided_by__username")
    by_run: dict[str, dict[str, dict]] = {}
    for run_id, tool_call_id, decision, reason, by in decided:
        # The server decides (with no one as ``by``) only when the request lapsed.
        by_run.setdefault(str(run_id), {})[tool_call_id] = {
            "decision": decision, "reason": reason, "by": by, "expired": by is None}
    return by_run


def approval_deadline(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.CHATFORGE_APPROVAL_TIMEOUT_S)


def announce_requests(run: Run, invocations: list[ToolInvocation]) -> None:
    """``approval.required`` for each call that waits (published on commit)."""
    for inv in invocations:
        if inv.status == AWAITING:
            events.approval_required(ref(run), tool_call_id=inv.tool_call_id, name=inv.name,
                                     arguments=inv.arguments, expires_at=iso(inv.approval_expires_at))


def decide(
    *, run_id: str, tool_call_id: str, user: AbstractBaseUser, decision: str, reason: str = ""
) -> ToolInvocation:
    """The run's owner approves or denies one waiting call. Repeating the
    decision already made returns the call unchanged; a different one raises
    ``DecisionConflict``. Another user's run is "not found"."""
    decision = Decision(decision)
    with transaction.atomic():
        inv = _locked_call(run_id, tool_call_id, user)
        if inv.approval_decision:
            if inv.approval_decision == decision:
                return inv  # the same decision again (a retry, a second tab): nothing to do
            raise DecisionConflict(_already_decided(inv), details=_decision_details(inv))
        if inv.status != AWAITING or inv.run.is_terminal:
            raise DecisionConflict(
                f"Tool call {tool_call_id} does not wait for a decision: "
                + (f"the run has ended ({inv.run.status})." if inv.run.is_terminal
                   else f"its tool does not require approval (it is {inv.status})."),
                details={"tool_call_id": tool_call_id, "status": inv.status, "run_status": inv.run.status},
            )
        _apply(inv, decision, reason=reason, by=user)
    return inv


def expire_overdue(now: datetime | None = None, *, limit: int = 500) -> int:
    """Deny the calls whose approval request lapsed (the sweeper's pass)."""
    now = now or timezone.now()
    overdue = list(
        ToolInvocation.objects.filter(status=AWAITING, approval_expires_at__lt=now,
                                      run__status__in=[Run.Status.QUEUED, Run.Status.RUNNING])
        .values_list("pk", flat=True)[:limit]
    )
    expired = 0
    for pk in overdue:
        with transaction.atomic():
            inv = ToolInvocation.objects.select_for_update().select_related("run").filter(pk=pk, status=AWAITING).first()
            if inv is None or inv.run.is_terminal:
                continue  # decided (or the run ended) since the query
            _apply(inv, Decision.DENY, reason="", by=None)
            expired += 1
            logger.info("run %s: approval of %s (%s) lapsed; denied", inv.run_id, inv.tool_call_id, inv.name)
    return expired


def _locked_call(run_id: str, tool_call_id: str, user: AbstractBaseUser) -> ToolInvocation:
    inv = (
        ToolInvocation.objects.select_for_update(of=("self",))
        .select_related("run", "approval_decided_by")
        .filter(run_id=run_id, run__user=user, tool_call_id=tool_call_id)
        .first()
    )
    if inv is None:
        raise NotFound(f"Run {run_id} has no tool call {tool_call_id!r}.",
                       details={"run_id": str(run_id), "tool_call_id": tool_call_id})
    return inv


def _apply(inv: ToolInvocation, decision: Decision, *, reason: str, by: AbstractBaseUser | None) -> None:
    """Record the decision and act on it, in the caller's transaction."""
    now = timezone.now()
    expired = by is None
    if expired:
        reason = f"No decision within {settings.CHATFORGE_APPROVAL_TIMEOUT_S:g} seconds."
    inv.approval_decision, inv.approval_reason = decision, reason
    inv.approval_decided_by, inv.approval_decided_at = by, now
    fields = {"approval_decision": decision, "approval_reason": reason,
              "approval_decided_by": by, "approval_decided_at": now}
    run = inv.run
    events.approval_decided(ref(run), tool_call_id=inv.tool_call_id, decision=decision, reason=reason,
                            by=by.get_username() if by is not None else None, expired=expired)
    record.approval("expired" if expired else _PAST[decision])
    if decision == Decision.APPROVE:
        ToolInvocation.objects.filter(pk=inv.pk, status=AWAITING).update(status=ToolInvocation.Status.PENDING,
                                                                         **fields)
        inv.status = ToolInvocation.Status.PENDING
        # The sweeper counts a stall from here: the call is now a step like any other.
        Run.objects.filter(pk=run.pk).update(heartbeat_at=now)
        dispatch.tool_calls(run, [(inv.tool_call_id, inv.name, inv.position)])
        return
    ToolInvocation.objects.filter(pk=inv.pk).update(**fields)
    waited = (inv.approval_expires_at - inv.created_at).total_seconds() if inv.approval_expires_at else 0
    output = expired_output(inv.name, round(waited)) if expired else declined_output(inv.name, reason)
    result = ToolResult(tool_name=inv.name, status="error", error=output, error_kind="declined")
    record_result(inv, result, from_status=AWAITING)
    inv.status = ToolInvocation.Status.ERROR


def _already_decided(inv: ToolInvocation) -> str:
    who = inv.approval_decided_by.get_username() if inv.approval_decided_by else "the server (no decision in time)"
    return (f"Tool call {inv.tool_call_id} was already {_PAST[Decision(inv.approval_decision)]} by {who} "
            f"at {iso(inv.approval_decided_at)}; a decision cannot be changed.")


def _decision_details(inv: ToolInvocation) -> dict:
    return {"tool_call_id": inv.tool_call_id, "decision": inv.approval_decision,
            "decided_at": iso(inv.approval_decided_at)}
