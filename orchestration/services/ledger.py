"""Locking a run for the decisions that must happen once (fan-in, finalize).

Writers that decide for the whole run lock the run row first, which
serialises those decisions across workers on any host; single steps are
claimed and recorded with conditional updates (``claims.py``). (SQLite in embedded mode ignores row locks but takes the
database write lock at the start of each transaction, which is stricter.)
"""

from __future__ import annotations

from django.utils import timezone

from chatforge.conversations.models import Run
from orchestration.event_log.events import RunRef


def lock_run(run_id: str) -> Run | None:
    return Run.objects.select_for_update().filter(pk=run_id).first()


def ref(run: Run) -> RunRef:
    return RunRef(run_id=str(run.id), conversation_id=str(run.conversation_id))


def touch(run: Run) -> None:
    """Mark the run alive (the sweeper leaves runs with a fresh heartbeat alone)."""
    run.heartbeat_at = timezone.now()
