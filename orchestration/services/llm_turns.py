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
from django.db import DatabaseError, transaction
from django.utils import timezone

from chatforge.conversations.models import LlmTurn, Run, ToolInvocation

from .. import dispatch, events
from ..history import TurnInput, input_for_turn
from ..providers import ProviderError, get_provider
from ..providers.base import ReasoningDelta, TextDelta, ToolCall, TurnRequest, TurnResult
from ..tooling import get_registry
from .claims import claim_turn, mark_run_running
from .finalize import Outcome, run_finalize, step_must_stop
from .heartbeat import step_lease
from .ledger import ref

logger = logging.getLogger(__name__)

# How often the streaming loop looks at the cancel flag.
_CHECK_INTERVAL_S = 1.0


@dataclass(frozen=True)
class _Streamed:
    result: TurnResult | None  # None: cancelled or failed mid-stream
    partial_text: str
    provider_ms: int
    error: str = ""  # why the model call failed, for the person reading the run


def _emit_tool_call_events(run: Run, invocations: list[ToolInvocation]) -> None:
    for inv in invocations:
        events.tool_call(
            ref(run),
            tool_call_id=inv.tool_call_id,
            name=inv.name,
            arguments=inv.arguments,
            iteration=inv.iteration,
            text_offset=inv.text_offset,
        )


def _cancel_requested(run_id: str) -> bool:
    return bool(Run.objects.filter(pk=run_id).values_list("cancel_requested", flat=True).first())


def _stream(run: Run, request: TurnRequest) -> _Streamed:
    """Call the model, publishing deltas as they arrive. Provider failures and
    unexpected adapter errors end in a ``_Streamed`` with ``error`` set (and
    the text streamed so far); database errors propagate so the task retries."""
    r = ref(run)
    parts: list[str] = []
    result: TurnResult | None = None
    started = time.monotonic()
    next_check = started + _CHECK_INTERVAL_S
    stream = get_provider(run.model).stream_turn(request)
    error = ""
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
                if _cancel_requested(str(run.id)):
                    result = None
                    break
    except ProviderError as exc:
        result, error = None, exc.message
    except DatabaseError:
        raise
    except Exception as exc:  # a bug in an adapter must not leave the run hanging
        logger.exception("run %s: unexpected error while streaming from %s", run.id, run.model)
        result = None
        error = (
            f"Internal error while talking to the model ({type(exc).__name__}); "
            "the details are in the worker log."
        )
    finally:
        stream.close()  # closes the upstream connection when we stop early
    return _Streamed(result, "".join(parts), int((time.monotonic() - started) * 1000), error)


def _unique_calls(iteration: int, calls: list[ToolCall], used_ids: frozenset[str]) -> list[ToolCall]:
    """Models sometimes reuse or omit call ids; ids must be unique in a run."""
    used = set(used_ids)
    unique: list[ToolCall] = []
    for call in calls:
        call_id = call.id
        if not call_id or call_id in used:
            call_id = f"call_{iteration}_{len(unique)}_{secrets.token_hex(4)}"
        used.add(call_id)
        unique.append(ToolCall(id=call_id, name=call.name, arguments=call.arguments))
    return unique


def _record(turn: LlmTurn, result: TurnResult, provider_ms: int, turn_input: TurnInput) -> bool | None:
    """Write the finished turn; create and dispatch its tool calls.
    Returns whether it asked for tools, or None if another delivery of the
    same turn recorded it first (the conditional update decides)."""
    run = turn.run
    calls = _unique_calls(turn.iteration, result.tool_calls, turn_input.used_call_ids) if turn.offered_tools else []
    now = timezone.now()
    with transaction.atomic():
        recorded = LlmTurn.objects.filter(pk=turn.pk, status="running").update(
            status="completed",
            text=result.text,
            reasoning=result.reasoning,
            tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls],
            finish_reason="tool_calls" if calls else ("stop" if result.finish_reason == "tool_calls" else result.finish_reason),
            usage=result.usage,
            response_id=result.response_id or "",
            provider_ms=provider_ms,
            finished_at=now,
        )
        if not recorded:
            return None
        if calls:
            invocations = ToolInvocation.objects.bulk_create(
                ToolInvocation(
                    run=run,
                    tool_call_id=c.id,
                    iteration=turn.iteration,
                    position=pos,
                    name=c.name,
                    arguments=c.arguments,
                    text_offset=turn_input.prior_text_length + len(result.text),
                )
                for pos, c in enumerate(calls)
            )
            _emit_tool_call_events(run, invocations)
            for c in calls:
                dispatch.tool_call(str(run.id), c.id)
        Run.objects.filter(pk=run.pk).update(heartbeat_at=now)
    return bool(calls)


def _after_done(turn: LlmTurn) -> None:
    """A delivery of a turn that is already completed: re-emit and move on."""
    run = turn.run
    if turn.tool_calls:
        invocations = list(ToolInvocation.objects.filter(run=run, iteration=turn.iteration).order_by("position"))
        _emit_tool_call_events(run, invocations)
    else:
        run_finalize(run_id=str(run.id), outcome=Outcome.COMPLETED)


def llm_turn_execute(*, run_id: str, iteration: int) -> None:
    turn = claim_turn(run_id, iteration)
    if turn is None:
        # Completed (re-emit and move on), or a live delivery is running it.
        done = LlmTurn.objects.select_related("run").filter(run_id=run_id, iteration=iteration, status="completed").first()
        if done is not None and not done.run.is_terminal:
            _after_done(done)
        return
    run = turn.run
    if step_must_stop(run):
        return
    if turn.deliveries > settings.CHATFORGE_MAX_STEP_DELIVERIES:
        run_finalize(
            run_id=run_id,
            outcome=Outcome.FAILED,
            error=(
                f"The model step was started {turn.deliveries - 1} times without finishing "
                "(its workers kept stopping); the run was given up."
            ),
        )
        return
    if run.status != Run.Status.RUNNING or run.iteration != iteration or turn.deliveries > 1:
        mark_run_running(run, iteration)  # the fan-in already moved a running run here
    if iteration == 0:
        events.run_started(ref(run), message_id=str(run.user_message_id))
    events.llm_started(ref(run), iteration=iteration)

    turn_input = input_for_turn(run, iteration, offer_tools=turn.offered_tools)
    request = TurnRequest(
        model=run.model,
        messages=turn_input.messages,
        tools=get_registry().specs(run.options.get("tools", [])) if turn.offered_tools else [],
        options={k: v for k, v in run.options.items() if k in ("reasoning_effort",)},
    )
    with step_lease(run_id, turn):
        streamed = _stream(run, request)
    if streamed.error:
        logger.warning("run %s turn %s failed: %s", run_id, iteration, streamed.error)
        run_finalize(run_id=run_id, outcome=Outcome.FAILED, error=streamed.error, partial_text=streamed.partial_text)
        return
    if streamed.result is None:
        run_finalize(run_id=run_id, outcome=Outcome.CANCELLED, partial_text=streamed.partial_text)
        return
    has_calls = _record(turn, streamed.result, streamed.provider_ms, turn_input)
    if has_calls is False:
        run_finalize(run_id=run_id, outcome=Outcome.COMPLETED)
