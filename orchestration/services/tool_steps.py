"""One tool call of a round: claim it, run it through the executor (which
turns every failure into a result for the model), record the output, and —
if it is the last call of its round to finish — start the next model turn.

The fan-in is decided inside the transaction that records the output, with
the run row locked: exactly one call of the round sees "no call left" and
creates the next turn's row, so the next turn is enqueued exactly once, even
when the calls finish at the same instant on different hosts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chatforge.conversations.models import LlmTurn, Run, ToolInvocation
from tools.base import ToolContext
from tools.executor import ToolResult, execute_tool

from .. import dispatch, events
from ..tooling import get_registry
from .finalize import Outcome, run_finalize
from .ledger import lock_invocation, lock_run, ref, touch

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Claim:
    run: Run
    invocation: ToolInvocation
    # Set when the call must not run (again); this result is recorded instead.
    preset: ToolResult | None = None


def _error_result(name: str, text: str) -> ToolResult:
    return ToolResult(tool_name=name, status="error", error=text)


def _claim(run_id: str, tool_call_id: str) -> _Claim | None:
    with transaction.atomic():
        run = lock_run(run_id)
        if run is None or run.is_terminal:
            return None
        inv = lock_invocation(run, tool_call_id)
        if inv is None:
            logger.warning("run %s has no tool call %s; ignoring the delivery", run_id, tool_call_id)
            return None
        if inv.is_finished:
            return None  # redelivered after it was recorded: the fan-in already happened
        if run.cancel_requested:
            transaction.on_commit(lambda: run_finalize(run_id=run_id, outcome=Outcome.CANCELLED))
            return None
        was_started = inv.status == ToolInvocation.Status.RUNNING
        inv.deliveries += 1
        preset: ToolResult | None = None
        tool = get_registry().get(inv.name)
        if inv.deliveries > settings.CHATFORGE_MAX_STEP_DELIVERIES:
            preset = _error_result(
                inv.name,
                f"Error: tool '{inv.name}' could not be completed: its worker stopped "
                f"{inv.deliveries - 1} times while running it.",
            )
        elif was_started and tool is not None and tool.policy.side_effects == "not_idempotent":
            # It may already have taken effect; never run it twice.
            preset = _error_result(
                inv.name,
                f"Error: tool '{inv.name}' was interrupted while running and is not safe to "
                "run again; it may or may not have taken effect.",
            )
        inv.status = ToolInvocation.Status.RUNNING
        inv.started_at = inv.started_at or timezone.now()
        inv.save(update_fields=["deliveries", "status", "started_at"])
        touch(run)
        run.save(update_fields=["heartbeat_at"])
    return _Claim(run, inv, preset)


def _complete(run_id: str, tool_call_id: str, result: ToolResult) -> None:
    with transaction.atomic():
        run = lock_run(run_id)
        if run is None or run.is_terminal:
            return
        inv = lock_invocation(run, tool_call_id)
        if inv is None or inv.is_finished:
            return  # a parallel delivery recorded it first
        inv.status = result.status
        inv.output = result.output_text()
        inv.result = result.as_dict()
        inv.error = result.error or ""
        inv.attempts = result.attempts
        inv.duration_ms = result.execution_time_ms
        inv.finished_at = timezone.now()
        inv.save()
        events.tool_output(
            ref(run),
            tool_call_id=inv.tool_call_id,
            name=inv.name,
            output=inv.output,
            status=inv.status,
            execution_time_ms=result.execution_time_ms,
        )
        touch(run)
        run.save(update_fields=["heartbeat_at"])
        _fan_in(run, inv.iteration)


def _fan_in(run: Run, iteration: int) -> None:
    """Called with the run row locked, after recording one output."""
    pending = (
        ToolInvocation.objects.filter(run=run, iteration=iteration)
        .exclude(status__in=ToolInvocation.FINISHED)
        .exists()
    )
    if pending:
        return
    if run.cancel_requested:
        transaction.on_commit(lambda: run_finalize(run_id=str(run.id), outcome=Outcome.CANCELLED))
        return
    next_iteration = iteration + 1
    cap = run.options.get("max_iterations", settings.CHATFORGE_MAX_ITERATIONS)
    _, created = LlmTurn.objects.get_or_create(
        run=run, iteration=next_iteration, defaults={"offered_tools": next_iteration < cap}
    )
    if created:
        run.iteration = next_iteration
        run.save(update_fields=["iteration"])
        dispatch.llm_turn(str(run.id), next_iteration)


def tool_call_execute(*, run_id: str, tool_call_id: str) -> None:
    claim = _claim(run_id, tool_call_id)
    if claim is None:
        return
    inv = claim.invocation
    result = claim.preset
    if result is None:
        r = ref(claim.run)
        result = execute_tool(
            get_registry(),
            inv.name,
            inv.arguments,
            context=ToolContext(
                run_id=str(claim.run.id), tool_call_id=inv.tool_call_id, user_id=claim.run.user_id
            ),
            on_retry=lambda attempt, error: events.tool_retry(
                r, tool_call_id=inv.tool_call_id, attempt=attempt, error=error
            ),
        )
    _complete(run_id, tool_call_id, result)
