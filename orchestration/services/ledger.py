"""Row locking for the step ledger, always in one order: run, then step rows.

Every writer that touches a run's steps locks the run row first, which
serialises the decisions that must happen once (fan-in, finalize) across
workers on any host. (SQLite in embedded mode ignores row locks but takes the
database write lock at the start of each transaction, which is stricter.)
"""

from __future__ import annotations

from django.utils import timezone

from chatforge.conversations.models import LlmTurn, Run, ToolInvocation

from ..events import RunRef


def lock_run(run_id: str) -> Run | None:
    return (
        Run.objects.select_for_update()
        .select_related("user_message")
        .filter(pk=run_id)
        .first()
    )


def lock_turn(run: Run, iteration: int) -> LlmTurn | None:
    return LlmTurn.objects.select_for_update().filter(run=run, iteration=iteration).first()


def lock_invocation(run: Run, tool_call_id: str) -> ToolInvocation | None:
    return ToolInvocation.objects.select_for_update().filter(run=run, tool_call_id=tool_call_id).first()


def ref(run: Run) -> RunRef:
    return RunRef(run_id=str(run.id), conversation_id=str(run.conversation_id))


def touch(run: Run) -> None:
    """Mark the run alive (the sweeper leaves runs with a fresh heartbeat alone)."""
    run.heartbeat_at = timezone.now()
