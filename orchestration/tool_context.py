"""The context a tool call runs with: who it is for, and their secrets."""

from __future__ import annotations

from chatforge.accounts.secrets import secret_lookup_for
from orchestration.event_log import get_event_log
from tools.base import ToolContext


def tool_context_for(*, user_id: int | None, run_id: str | None = None, tool_call_id: str | None = None) -> ToolContext:
    return ToolContext(
        run_id=run_id,
        tool_call_id=tool_call_id,
        user_id=user_id,
        secret_lookup=secret_lookup_for(user_id) if user_id is not None else None,
        cancel_check=_run_ended(run_id) if run_id is not None else None,
    )


def _run_ended(run_id: str):
    """Asks the run's event log (Redis, safe from any thread — handlers run in
    their own) whether the run ended: cancelling a run that waits on tools
    ends it at once, so this is how a running tool learns of a cancel."""

    def ended() -> bool:
        return get_event_log().info(run_id).ended

    return ended
