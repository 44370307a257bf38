"""Claiming a step for one delivery, in one statement.

``UPDATE … SET status='running', deliveries=deliveries+1, heartbeat_at=now
WHERE status='pending' OR (status='running' AND the lease expired)`` is
atomic on its own: it records the step as started (before any side effect),
counts deliveries and takes the lease. It matches nothing when the step is
completed, or when another delivery is running it right now (its lease is
fresh) — so duplicates are recognised without a transaction or a row lock
held across statements. ``deliveries > 1`` after a claim means an earlier
delivery started the step and died before finishing it.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from chatforge.conversations.models import LlmTurn, Run, ToolInvocation


def _claimable(now) -> Q:
    expired = now - timedelta(seconds=settings.CHATFORGE_RUN_STALL_S)
    lease_expired = Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=expired)
    return Q(status="pending") | (Q(status="running") & lease_expired)


def _claim_values(now) -> dict:
    return {
        "status": "running",
        "deliveries": F("deliveries") + 1,
        "started_at": Coalesce(F("started_at"), now),
        "heartbeat_at": now,
    }


def claim_turn(run_id: str, iteration: int) -> LlmTurn | None:
    """The claimed turn (with its run and user message loaded), or None when
    it does not exist, is completed, or is being run by a live delivery."""
    now = timezone.now()
    claimed = LlmTurn.objects.filter(_claimable(now), run_id=run_id, iteration=iteration).update(
        **_claim_values(now)
    )
    if not claimed:
        return None
    return LlmTurn.objects.select_related("run", "run__user_message").get(run_id=run_id, iteration=iteration)


def claim_invocation(run_id: str, tool_call_id: str) -> ToolInvocation | None:
    """The claimed invocation (with its run loaded), or None when it does not
    exist, is finished, or is being run by a live delivery."""
    now = timezone.now()
    claimed = ToolInvocation.objects.filter(_claimable(now), run_id=run_id, tool_call_id=tool_call_id).update(
        **_claim_values(now)
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


def release_turn(turn: LlmTurn) -> bool:
    """Hand a claimed turn back (pending, no lease) after an infrastructure
    failure — the event log or the database went away mid-turn — so the
    task's retry or the sweeper can run it at once instead of waiting for
    the lease to expire. The delivery is not counted: the worker did not
    die, and a model call is safe to repeat. Only the delivery holding the
    claim releases it (``status='running'`` and its own delivery count)."""
    return bool(
        LlmTurn.objects.filter(pk=turn.pk, status="running", deliveries=turn.deliveries).update(
            status="pending", heartbeat_at=None, deliveries=F("deliveries") - 1
        )
    )
