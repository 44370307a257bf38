"""One model turn of a run: claim it in the ledger, stream the model's answer
as events, then record the turn and fan out its tool calls — or finalize.

A turn is memoised: once completed it is never called again, and a delivery
that finds it completed only re-emits its events and moves on.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chatforge.conversations.models import LlmTurn, Run, ToolInvocation

from .. import dispatch, events
from ..history import messages_for_turn
from ..providers import ProviderError, get_provider
from ..providers.base import ReasoningDelta, TextDelta, ToolCall, TurnRequest, TurnResult
from ..tooling import get_registry
from .finalize import Outcome, run_finalize
from .ledger import lock_run, lock_turn, ref, touch

logger = logging.getLogger(__name__)

# How often the streaming loop looks at the cancel flag and refreshes the heartbeat.
_CHECK_INTERVAL_S = 1.0


@dataclass(frozen=True)
class _Claim:
    run: Run
    turn: LlmTurn
    already_done: bool


def _claim(run_id: str, iteration: int) -> _Claim | None:
    """Take the turn for this delivery, or say why not (None: nothing to do)."""
    with transaction.atomic():
        run = lock_run(run_id)
        if run is None or run.is_terminal:
            return None
        turn = lock_turn(run, iteration)
        if turn is None:
            logger.warning("run %s has no turn %s; ignoring the delivery", run_id, iteration)
            return None
        if turn.status == "completed":
            return _Claim(run, turn, already_done=True)
        if run.cancel_requested:
            transaction.on_commit(lambda: run_finalize(run_id=run_id, outcome=Outcome.CANCELLED))
            return None
        turn.deliveries += 1
        if turn.deliveries > settings.CHATFORGE_MAX_STEP_DELIVERIES:
            error = (
                f"The model step was started {turn.deliveries - 1} times without finishing "
                "(its workers kept stopping); the run was given up."
            )
            turn.save(update_fields=["deliveries"])
            transaction.on_commit(
                lambda: run_finalize(run_id=run_id, outcome=Outcome.FAILED, error=error)
            )
            return None
        now = timezone.now()
        turn.status = "running"
        turn.started_at = turn.started_at or now
        turn.save(update_fields=["deliveries", "status", "started_at"])
        run.status = Run.Status.RUNNING
        run.started_at = run.started_at or now
        run.iteration = iteration
        touch(run)
        run.save(update_fields=["status", "started_at", "iteration", "heartbeat_at"])
    if iteration == 0:
        events.run_started(ref(run), message_id=str(run.user_message_id))
    return _Claim(run, turn, already_done=False)


def _emit_tool_call_events(run: Run, turn: LlmTurn) -> None:
    invocations = ToolInvocation.objects.filter(run=run, iteration=turn.iteration).order_by("position")
    for inv in invocations:
        events.tool_call(
            ref(run),
            tool_call_id=inv.tool_call_id,
            name=inv.name,
            arguments=inv.arguments,
            iteration=inv.iteration,
            text_offset=inv.text_offset,
        )


def _cancel_requested_and_touch(run_id: str) -> bool:
    Run.objects.filter(pk=run_id).update(heartbeat_at=timezone.now())
    return bool(Run.objects.filter(pk=run_id).values_list("cancel_requested", flat=True).first())


def _stream(run: Run, turn: LlmTurn) -> tuple[TurnResult | None, str]:
    """Call the model, publishing deltas. Returns (result, partial text);
    result is None when the run was cancelled mid-stream."""
    offer_tools = turn.offered_tools
    registry = get_registry()
    request = TurnRequest(
        model=run.model,
        messages=messages_for_turn(run, turn.iteration, offer_tools=offer_tools),
        tools=registry.specs(run.options.get("tools", [])) if offer_tools else [],
        options={k: v for k, v in run.options.items() if k in ("reasoning_effort",)},
    )
    r = ref(run)
    parts: list[str] = []
    result: TurnResult | None = None
    next_check = time.monotonic() + _CHECK_INTERVAL_S
    stream = get_provider(run.model).stream_turn(request)
    try:
        for item in stream:
            if isinstance(item, TextDelta):
                if item.text:
                    parts.append(item.text)
                    events.content_delta(r, text=item.text)
            elif isinstance(item, ReasoningDelta):
                events.reasoning_delta(r, text=item.text)
            elif isinstance(item, TurnResult):
                result = item
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + _CHECK_INTERVAL_S
                if _cancel_requested_and_touch(str(run.id)):
                    return None, "".join(parts)
    finally:
        stream.close()  # closes the upstream connection when we stop early
    return result, "".join(parts)


def _unique_calls(run: Run, turn: LlmTurn, calls: list[ToolCall]) -> list[ToolCall]:
    """Models sometimes reuse or omit call ids; ids must be unique in a run."""
    used = set(ToolInvocation.objects.filter(run=run).values_list("tool_call_id", flat=True))
    unique: list[ToolCall] = []
    for call in calls:
        call_id = call.id
        if not call_id or call_id in used:
            call_id = f"call_{turn.iteration}_{len(unique)}_{secrets.token_hex(4)}"
        used.add(call_id)
        unique.append(ToolCall(id=call_id, name=call.name, arguments=call.arguments))
    return unique


def _record(run_id: str, iteration: int, result: TurnResult) -> tuple[bool, bool]:
    """Write the finished turn; create and dispatch its tool calls.
    Returns (recorded_by_us, has_tool_calls)."""
    with transaction.atomic():
        run = lock_run(run_id)
        if run is None or run.is_terminal:
            return False, False
        turn = lock_turn(run, iteration)
        if turn is None or turn.status == "completed":
            return False, False  # a parallel delivery recorded it first
        calls = _unique_calls(run, turn, result.tool_calls) if turn.offered_tools else []
        turn.status = "completed"
        turn.text = result.text
        turn.reasoning = result.reasoning
        turn.tool_calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]
        turn.finish_reason = "tool_calls" if calls else (
            "stop" if result.finish_reason == "tool_calls" else result.finish_reason
        )
        turn.usage = result.usage
        turn.response_id = result.response_id or ""
        turn.finished_at = timezone.now()
        turn.save()
        if calls:
            offset = _text_offset(run, turn)
            ToolInvocation.objects.bulk_create(
                ToolInvocation(
                    run=run,
                    tool_call_id=c.id,
                    iteration=iteration,
                    position=pos,
                    name=c.name,
                    arguments=c.arguments,
                    text_offset=offset,
                )
                for pos, c in enumerate(calls)
            )
            _emit_tool_call_events(run, turn)
            for c in calls:
                dispatch.tool_call(str(run.id), c.id)
        touch(run)
        run.save(update_fields=["heartbeat_at"])
    return True, bool(calls)


def _text_offset(run: Run, turn: LlmTurn) -> int:
    """Where in the run's streamed text these calls happened (seed 000)."""
    earlier = LlmTurn.objects.filter(run=run, iteration__lt=turn.iteration, status="completed")
    return sum(len(t.text) for t in earlier) + len(turn.text)


def llm_turn_execute(*, run_id: str, iteration: int) -> None:
    claim = _claim(run_id, iteration)
    if claim is None:
        return
    run, turn = claim.run, claim.turn
    if claim.already_done:
        # Redelivered after it finished: re-emit (deduplicated) and move on.
        if turn.tool_calls:
            _emit_tool_call_events(run, turn)
        else:
            run_finalize(run_id=run_id, outcome=Outcome.COMPLETED)
        return
    events.llm_started(ref(run), iteration=iteration)
    try:
        result, partial = _stream(run, turn)
    except ProviderError as exc:
        logger.warning("run %s turn %s: provider error: %s", run_id, iteration, exc.message)
        run_finalize(run_id=run_id, outcome=Outcome.FAILED, error=exc.message)
        return
    if result is None:
        run_finalize(run_id=run_id, outcome=Outcome.CANCELLED, partial_text=partial)
        return
    recorded, has_calls = _record(run_id, iteration, result)
    if recorded and not has_calls:
        run_finalize(run_id=run_id, outcome=Outcome.COMPLETED)


__all__ = ["llm_turn_execute"]
