"""Claiming a step for one delivery, in one statement.

``UPDATE … SET status='running', deliveries=deliveries+1 WHERE status IN
('pending','running')`` is atomic on its own: it records the step as started
(before any side effect) and counts deliveries, and it matches nothing once
the step is completed — so a redelivered finished step is recognised without
a transaction or a row lock held across statements. ``deliveries > 1`` after
the claim means an earlier delivery started the step and did not finish it.
"""

from __future__ import annotations

from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from chatforge.conversations.models import LlmTurn, Run, ToolInvocation

_CLAIMABLE = ("pending", "running")


def claim_turn(run_id: str, iteration: int) -> LlmTurn | None:
    """The claimed turn (with its run and user message loaded), or None when
    it does not exist or is already completed."""
    claimed = LlmTurn.objects.filter(run_id=run_id, iteration=iteration, status__in=_CLAIMABLE).update(
        status="running",
        deliveries=F("deliveries") + 1,
        started_at=Coalesce(F("started_at"), timezone.now()),
    )
    if not claimed:
        return None
    return LlmTurn.objects.select_related("run", "run__user_message").get(run_id=run_id, iteration=iteration)


def claim_invocation(run_id: str, tool_call_id: str) -> ToolInvocation | None:
    """The claimed invocation (with its run loaded), or None when it does not
    exist or is already finished."""
    claimed = ToolInvocation.objects.filter(
        run_id=run_id, tool_call_id=tool_call_id, status__in=_CLAIMABLE
    ).update(
        status="running",
        deliveries=F("deliveries") + 1,
        started_at=Coalesce(F("started_at"), timezone.now()),
    )
    if not claimed:
        return None
    return ToolInvocation.objects.select_related("run").get(run_id=run_id, tool_call_id=tool_call_id)


def mark_run_running(run: Run, iteration: int) -> None:
    """Status, start time, current iteration and heartbeat in one statement;
    never overwrites a terminal status."""
    now = timezone.now()
    Run.objects.filter(pk=run.pk, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]).update(
        status=Run.Status.RUNNING,
        started_at=Coalesce(F("started_at"), now),
        iteration=iteration,
        heartbeat_at=now,
    )
