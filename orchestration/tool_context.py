"""The context a tool call runs with: who it is for, and their secrets."""

from __future__ import annotations

from chatforge.accounts.secrets import secret_lookup_for
from tools.base import ToolContext


def tool_context_for(*, user_id: int | None, run_id: str | None = None, tool_call_id: str | None = None) -> ToolContext:
    return ToolContext(
        run_id=run_id,
        tool_call_id=tool_call_id,
        user_id=user_id,
        secret_lookup=secret_lookup_for(user_id) if user_id is not None else None,
    )
