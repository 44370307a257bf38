"""The context a tool call runs with: who it is for, their secrets, and the
files of the conversation it belongs to."""

from __future__ import annotations

from collections.abc import Mapping

from chatforge.accounts.secrets import secret_lookup_for
from orchestration.event_log import get_event_log
from orchestration.services.sandbox_host import sandbox_for
from orchestration.services.tool_files import conversation_files_for
from tools.base import ToolContext, ToolPolicy


def tool_context_for(
    *,
    user_id: int | None,
    run_id: str | None = None,
    tool_call_id: str | None = None,
    user_ciphertexts: Mapping[str, str] | None = None,
    conversation_id: str | None = None,
    policy: ToolPolicy | None = None,
) -> ToolContext:
    """``user_ciphertexts``: the user's secrets if already read (the engine's
    claim reads them with the step); otherwise they are read here.
    ``conversation_id``: the run's conversation, whose files the call may
    read and add to (``ToolContext.files``; None without one). ``policy``:
    the tool's, which gives a sandboxed tool its sandbox (on a sandbox
    worker). Nothing is read until the tool asks."""
    cancel_check = _run_ended(run_id) if run_id is not None else None
    return ToolContext(
        run_id=run_id,
        tool_call_id=tool_call_id,
        user_id=user_id,
        secret_lookup=secret_lookup_for(user_id, ciphertexts=user_ciphertexts) if user_id is not None else None,
        cancel_check=cancel_check,
        sandbox=sandbox_for(policy, cancel_check) if policy is not None else None,
        files=conversation_files_for(user_id=user_id, conversation_id=conversation_id, run_id=run_id,
                                     tool_call_id=tool_call_id),
    )


def _run_ended(run_id: str):
    """Asks the run's event log (Redis, safe from any thread — handlers run in
    their own) whether the run ended: cancelling a run that waits on tools
    ends it at once, so this is how a running tool learns of a cancel."""

    def ended() -> bool:
        return get_event_log().info(run_id).ended

    return ended
