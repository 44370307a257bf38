"""Celery tasks: thin interfaces over the engine's services.

Each takes ids only, and the service it calls checks the ledger first, so a
redelivered task (acks_late, reject_on_worker_lost) is a no-op or a clean
re-run. Infrastructure failures — the database, or the event log in Redis —
are retried with backoff (the service hands its step back first);
everything else is the service's to turn into a run outcome.
"""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from orchestration.event_log.events import EventLogUnavailable

from .services.finalize import Outcome, run_finalize
from .services.llm_turns import llm_turn_execute
from .services.sweeper import sweep_stalled_runs as sweep
from .services.tool_steps import tool_call_execute

_DB_RETRY = {
    "autoretry_for": (OperationalError, InterfaceError, EventLogUnavailable),
    "retry_backoff": True,
    "retry_backoff_max": 30,
    "retry_jitter": True,
    "max_retries": 5,
}


@shared_task(name="chatforge.llm_turn", time_limit=settings.CHATFORGE_LLM_HARD_TIME_LIMIT_S, **_DB_RETRY)
def llm_turn(run_id: str, iteration: int) -> None:
    llm_turn_execute(run_id=run_id, iteration=iteration)


@shared_task(
    name="chatforge.tool_call",
    time_limit=settings.CHATFORGE_TOOL_HARD_TIME_LIMIT_S,
    **_DB_RETRY,
)
def tool_call(run_id: str, tool_call_id: str) -> None:
    tool_call_execute(run_id=run_id, tool_call_id=tool_call_id)


# The same step for tools whose policy says pool="io", on the tools_io
# queue's threads pool (decision 0025). No hard time limit: a threads pool
# cannot enforce one. The executor stops waiting at the tool's timeout
# (an async handler is cancelled; a sync one's thread is abandoned).
@shared_task(name="chatforge.tool_call_io", **_DB_RETRY)
def tool_call_io(run_id: str, tool_call_id: str) -> None:
    tool_call_execute(run_id=run_id, tool_call_id=tool_call_id)


# The same step for sandboxed tools, on the sandbox queue's prefork pool
# (docs/sandbox.md): the runner stops a sandbox at the tool's timeout; the
# hard time limit recycles a pool process that hangs all the same, and the
# sandbox dies with it.
@shared_task(name="chatforge.tool_call_sandbox", time_limit=settings.CHATFORGE_TOOL_HARD_TIME_LIMIT_S, **_DB_RETRY)
def tool_call_sandbox(run_id: str, tool_call_id: str) -> None:
    tool_call_execute(run_id=run_id, tool_call_id=tool_call_id)


@shared_task(name="chatforge.finalize_run", **_DB_RETRY)
def finalize_run(run_id: str, outcome: str, error: str = "") -> None:
    run_finalize(run_id=run_id, outcome=Outcome(outcome), error=error)


@shared_task(name="chatforge.sweep_stalled_runs")
def sweep_stalled_runs() -> int:
    return sweep()
