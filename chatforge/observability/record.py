"""What the engine reports to the metrics, one function per fact, so the
services say what happened in one line and the label rules live here."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.db import transaction

from . import metrics

if TYPE_CHECKING:
    from chatforge.conversations.models import Run
    from tools.executor import ToolResult


def run_started(model: str) -> None:
    transaction.on_commit(lambda: metrics.RUNS_STARTED.labels(model=model).inc())


def run_finished(run: Run) -> None:
    """Counted once the run's end is committed (finalize runs once per run)."""
    outcome = str(run.status)

    def count() -> None:
        metrics.RUNS_FINISHED.labels(model=run.model, outcome=outcome).inc()
        if run.finished_at is not None:
            metrics.RUN_DURATION.labels(outcome=outcome).observe((run.finished_at - run.created_at).total_seconds())
        metrics.RUN_ITERATIONS.observe(run.iteration + 1)
        if run.max_iterations_reached:
            metrics.ITERATION_CAP_HITS.labels(model=run.model).inc()

    transaction.on_commit(count)


def step_overhead(step: str, seconds: float) -> None:
    metrics.STEP_OVERHEAD.labels(step=step).observe(max(0.0, seconds))


def redelivered(step: str, deliveries: int) -> None:
    if deliveries > 1:
        metrics.STEP_REDELIVERIES.labels(step=step).inc()


def tool_recorded(name: str, result: ToolResult) -> None:
    if result.error_kind == "unknown_tool":
        name = "(unknown)"  # a name the model made up: not a label value to keep
    metrics.TOOL_CALLS.labels(tool=name, status=result.status).inc()
    if not result.cached:  # a cached result ran nothing: its lookup is no tool execution
        metrics.TOOL_DURATION.labels(tool=name).observe(result.execution_time_ms / 1000)
    if result.status != "success":
        metrics.TOOL_ERRORS.labels(tool=name, kind=result.error_kind or result.status).inc()


def tool_cache_lookup(name: str, outcome: str) -> None:
    """``outcome``: ``hit``, ``miss`` or ``unavailable`` (the cache could not be reached)."""
    metrics.TOOL_CACHE_LOOKUPS.labels(tool=name, outcome=outcome).inc()


def tool_retried(name: str) -> None:
    metrics.TOOL_RETRIES.labels(tool=name).inc()


def approval(outcome: str) -> None:
    metrics.APPROVALS.labels(outcome=outcome).inc()


def step_parked(task: str) -> None:
    metrics.STEPS_PARKED.labels(step=task.rpartition(".")[2]).inc()


def steps_unparked(by: str, count: int) -> None:
    if count:
        metrics.STEPS_UNPARKED.labels(by=by).inc(count)


def quota_refused(tool: str) -> None:
    metrics.QUOTA_REFUSALS.labels(tool=tool).inc()


def token_budget_refused(where: str) -> None:
    metrics.TOKEN_BUDGET_REFUSALS.labels(where=where).inc()


def sweeper_redrive(action: str) -> None:
    metrics.SWEEPER_REDRIVES.labels(action=action).inc()


def worker_lost(steps_sent_on: int) -> None:
    metrics.WORKERS_LOST.labels(what="workers").inc()
    metrics.WORKERS_LOST.labels(what="steps").inc(steps_sent_on)


def provider_attempt(provider: str, model: str, *, failure_kind: str | None, retried: bool) -> None:
    metrics.PROVIDER_REQUESTS.labels(provider=provider, model=model).inc()
    if failure_kind is not None:
        metrics.PROVIDER_ERRORS.labels(provider=provider, model=model, kind=failure_kind).inc()
    if retried:
        metrics.PROVIDER_RETRIES.labels(provider=provider, model=model).inc()


def time_to_first_token(provider: str, model: str, seconds: float) -> None:
    metrics.TIME_TO_FIRST_TOKEN.labels(provider=provider, model=model).observe(seconds)


def tokens(model: str, usage: dict[str, Any] | None) -> None:
    usage = usage or {}
    for direction, key in (("input", "prompt_tokens"), ("output", "completion_tokens")):
        value = usage.get(key)
        if isinstance(value, int) and value > 0:
            metrics.TOKENS.labels(model=model, direction=direction).inc(value)


# Events older than this when sent are replays (a client resuming), not relay lag.
_LIVE_EVENT_S = 60.0


def event_relayed(event: dict[str, Any]) -> None:
    """An event sent to a client: how long after its publication (its ``ts``)."""
    ts = event.get("ts")
    if not isinstance(ts, str):
        return
    try:
        published = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return
    lag = (datetime.now(UTC) - published).total_seconds()
    if 0 <= lag < _LIVE_EVENT_S:
        metrics.EVENT_RELAY_LAG.observe(lag)


def stream_opened(kind: str) -> None:
    metrics.OPEN_STREAMS.labels(kind=kind).inc()


def stream_closed(kind: str) -> None:
    metrics.OPEN_STREAMS.labels(kind=kind).dec()
