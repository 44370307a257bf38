"""Testing a model with a tool-enabled chat (``POST /api/tools/test/``, the
tool-testing page): start the run, follow it to its end, report what the
model did, and record whether it used its tools well toward the model's
validation status (``chatforge/llm/validation.py``)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from chatforge.conversations.models import Conversation, Message, Run, ToolInvocation
from chatforge.llm.models import ModelValidation
from chatforge.llm.validation import validation_status

from .run_follower import wait_for_run_end
from .runs import RunOptions, run_start

TEST_PROMPT_TITLE = "Tool test"


class TestTimedOut(Exception):
    def __init__(self, run: Run) -> None:
        super().__init__(f"run {run.id} did not finish in time")
        self.run = run


def _wait_for_end(run: Run, timeout_s: float) -> None:
    """Follow the run's events until its terminal event (the engine's run
    follower, as every reader of a run's events)."""
    try:
        wait_for_run_end(str(run.id), timeout_s=timeout_s)
    except TimeoutError:
        raise TestTimedOut(run) from None


def model_test_run(
    *,
    user: AbstractBaseUser,
    query: str,
    model: str,
    tools: list[str] | None = None,
    timeout_s: float = 120.0,
    record: bool = True,
) -> dict[str, Any]:
    """Run the query as a tool-enabled chat and, if ``record``, record the
    outcome toward the model's validation status (the caller checks
    ``may_record_validation``). The run counts toward the user's active-run
    cap like any message (``run_start`` refuses beyond it).

    Success means: the run completed, the model called at least one tool,
    and every call ran without error (a model that answers without its
    tools, or with broken arguments, does not count as using them).
    """
    # One transaction: a run refused (active-run cap, unknown tool) leaves no
    # empty conversation behind; the run is enqueued when it commits.
    with transaction.atomic():
        conversation = Conversation.objects.create(user=user, title=f"{TEST_PROMPT_TITLE}: {query[:60]}")
        run = run_start(user=user, conversation=conversation, content=query,
                        options=RunOptions(model=model, tools=tools))
    _wait_for_end(run, timeout_s)
    run.refresh_from_db()
    calls = list(ToolInvocation.objects.filter(run=run).order_by("iteration", "position"))
    answer = Message.objects.filter(run=run, role=Message.Role.ASSISTANT).values_list("content", flat=True).first()
    success = run.status == Run.Status.COMPLETED and bool(calls) and all(c.status == "success" for c in calls)
    error = run.error or ("" if calls else "The model did not call any tool.")
    if calls and not success and not run.error:
        error = "; ".join(f"{c.name}: {c.output[:200]}" for c in calls if c.status != "success")
    if record:
        ModelValidation.objects.create(
            model=model, query=query, success=success, tool_calls=len(calls),
            iterations=run.iteration + 1, error=error, run=run,
        )
    return {
        "model": model,
        "query": query,
        "run_id": str(run.id),
        "status": run.status,
        "success": success,
        "error": error,
        "tool_calls": [
            {"iteration": c.iteration, "name": c.name, "arguments": c.arguments, "status": c.status,
             "result": c.output, "execution_time_ms": c.duration_ms}
            for c in calls
        ],
        "answer": answer or "",
        "max_iterations_reached": run.max_iterations_reached,
        "recorded": record,
        "validation": validation_status(model).as_dict(),
    }
