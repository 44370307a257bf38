"""A run driven step by step in the test process: started on the idle
broker, its tasks delivered by hand, so a test decides when each step
happens (the realtime and run follower tests)."""

from __future__ import annotations

from chatforge.conversations.models import Conversation, Run, ToolInvocation
from orchestration import tasks
from orchestration.services.runs import RunOptions, run_start


def start(user, *, model: str) -> Run:
    """A run of ``model`` answering "6*7?" in a new conversation."""
    return run_start(user=user, conversation=Conversation.objects.create(user=user), content="6*7?",
                     options=RunOptions(model=model))


def first_turn(run: Run) -> list[str]:
    """Deliver turn 0 (it asks for two tools); the tool call ids."""
    tasks.llm_turn(str(run.id), 0)
    return list(ToolInvocation.objects.filter(run=run).order_by("position").values_list("tool_call_id", flat=True))


def finish(run: Run, calls: list[str]) -> None:
    for call in calls:
        tasks.tool_call(str(run.id), call)
    tasks.llm_turn(str(run.id), 1)
