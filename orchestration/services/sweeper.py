"""Re-enqueueing stalled runs.

A run whose heartbeat is older than CHATFORGE_RUN_STALL_S has lost its next
step (a worker died after committing but before enqueueing, or the broker
lost the message — even a Redis wipe). The next step is derived from the
ledger and enqueued again; steps are idempotent, so a run that was merely
slow is not harmed.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from chatforge.conversations.models import LlmTurn, Run, ToolInvocation

from .. import dispatch
from .finalize import Outcome, run_finalize
from .ledger import lock_run, touch

logger = logging.getLogger(__name__)


def run_redispatch(run_id: str) -> str:
    """Enqueue whatever the run needs next; returns what was done (for logs and tests)."""
    with transaction.atomic():
        run = lock_run(run_id)
        if run is None or run.is_terminal:
            return "nothing"
        if run.cancel_requested:
            transaction.on_commit(lambda: run_finalize(run_id=run_id, outcome=Outcome.CANCELLED))
            return "finalize"
        touch(run)
        run.save(update_fields=["heartbeat_at"])
        unfinished = list(
            ToolInvocation.objects.filter(run=run, iteration=run.iteration)
            .exclude(status__in=ToolInvocation.FINISHED)
            .values_list("tool_call_id", flat=True)
        )
        if unfinished:
            for call_id in unfinished:
                dispatch.tool_call(run_id, call_id)
            return "tools"
        turn = LlmTurn.objects.filter(run=run, iteration=run.iteration).first()
        if turn is not None and turn.status == "completed" and not turn.tool_calls:
            transaction.on_commit(lambda: run_finalize(run_id=run_id, outcome=Outcome.COMPLETED))
            return "finalize"
        dispatch.llm_turn(run_id, run.iteration)
        return "llm_turn"


def sweep_stalled_runs() -> int:
    cutoff = timezone.now() - timedelta(seconds=settings.CHATFORGE_RUN_STALL_S)
    stalled = Run.objects.filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, created_at__lt=cutoff),
        status__in=[Run.Status.QUEUED, Run.Status.RUNNING],
    ).values_list("id", flat=True)
    count = 0
    for run_id in stalled[:500]:
        action = run_redispatch(str(run_id))
        logger.warning("stalled run %s re-enqueued: %s", run_id, action)
        count += 1
    return count
