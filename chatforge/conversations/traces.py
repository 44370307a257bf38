"""A run's trace, built from its ledger rows for people to read (the admin's
run page): the run's timings, then each round, i.e. one model turn followed
by the tool calls it asked for.

Two queries whatever the run's size (its turns, its tool calls); the rows
are the engine's own records, so the trace shows what actually happened,
including steps that were redelivered or never finished.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .models import LlmTurn, Run, ToolInvocation


@dataclass(frozen=True)
class TraceCall:
    invocation: ToolInvocation
    arguments: str  # pretty-printed when it is JSON, else as the model sent it
    output: str  # what the model was given, pretty-printed when it is JSON
    duration_ms: int | None


@dataclass(frozen=True)
class TraceRound:
    iteration: int
    turn: LlmTurn | None  # None only if the ledger lost the turn row
    turn_ms: int | None
    usage: str  # the turn's token usage as compact JSON ("" when not reported)
    calls: list[TraceCall] = field(default_factory=list)


@dataclass(frozen=True)
class RunTrace:
    run: Run
    queued_ms: int | None  # created → started
    total_ms: int | None  # created → finished (or None while running)
    provider_ms: int  # the sum over the turns: time spent waiting on the model
    rounds: list[TraceRound]
    tool_calls: int


def build_run_trace(run: Run) -> RunTrace:
    """The trace of ``run``: rounds in iteration order, calls in the order the model made them."""
    turns = {turn.iteration: turn for turn in LlmTurn.objects.filter(run=run).order_by("iteration")}
    calls: dict[int, list[TraceCall]] = {}
    count = 0
    invocations = ToolInvocation.objects.filter(run=run).select_related("approval_decided_by")
    for invocation in invocations.order_by("iteration", "position", "id"):
        calls.setdefault(invocation.iteration, []).append(
            TraceCall(
                invocation=invocation,
                arguments=pretty_json_text(invocation.arguments),
                output=pretty_json_text(invocation.output),
                duration_ms=invocation.duration_ms,
            )
        )
        count += 1
    rounds = [_round(iteration, turns.get(iteration), calls.get(iteration, []))
              for iteration in sorted(set(turns) | set(calls))]
    return RunTrace(
        run=run,
        queued_ms=_ms_between(run.created_at, run.started_at),
        total_ms=_ms_between(run.created_at, run.finished_at),
        provider_ms=sum(turn.provider_ms or 0 for turn in turns.values()),
        rounds=rounds,
        tool_calls=count,
    )


def _round(iteration: int, turn: LlmTurn | None, calls: list[TraceCall]) -> TraceRound:
    if turn is None:
        return TraceRound(iteration=iteration, turn=None, turn_ms=None, usage="", calls=calls)
    return TraceRound(
        iteration=iteration,
        turn=turn,
        turn_ms=_ms_between(turn.started_at, turn.finished_at),
        usage=json.dumps(turn.usage, ensure_ascii=False) if turn.usage else "",
        calls=calls,
    )


def run_duration_ms(run: Run) -> int | None:
    """Milliseconds from the request to the end of the run; None until it ends."""
    return _ms_between(run.created_at, run.finished_at)


def pretty_json_text(text: str) -> str:
    """``text`` indented if it is a JSON object or array, otherwise unchanged
    (tool outputs are often plain text; arguments may be broken JSON)."""
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return text
    try:
        value: Any = json.loads(stripped)
    except ValueError:
        return text
    return json.dumps(value, indent=2, ensure_ascii=False)


def _ms_between(start: datetime | None, end: datetime | None) -> int | None:
    if start is None or end is None:
        return None
    return int((end - start).total_seconds() * 1000)
