"""Running one tool by hand, outside any run: the admin's "Run with
arguments" page and ``POST /api/tools/{name}/invoke/``.

Both run the tool through the same executor as a run's call (argument
checks, timeout, retries, results the model could read) with the calling
person's identity and secrets, so what an operator tries is what a run
would get. Which tool they may run differs, and is the caller's to decide:
the admin finds any configured tool, even one runs are not offered
(``chatforge.catalog.tool_runs.find_runnable_tool``); the API only the
catalog's.

Sandboxed tools (the ``python`` tool, script tools) are refused: their code
runs only inside a sandbox on the sandbox worker (docs/sandbox.md), and the
process that takes a manual run (a web process) has none. Both callers ask
``by_hand_refusal`` first, to say so before the person fills in arguments,
and ``run_tool_by_hand`` refuses again, so no caller can run the code
outside the sandbox by forgetting to ask.
"""

from __future__ import annotations

from typing import Any

from orchestration.services.tool_context import tool_context_for
from tools.base import Tool
from tools.executor import ToolResult, execute_tool
from tools.registry import ToolRegistry


class NotRunnableByHand(Exception):
    """The tool cannot be run by hand here; the message says why and what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def by_hand_refusal(tool: Tool) -> str | None:
    """Why ``tool`` cannot be run by hand, in words an operator can act on;
    None when it can."""
    if tool.policy.sandboxed:
        return (f"'{tool.name}' is a sandboxed tool: its code runs only on the sandbox worker, in a "
                "conversation's run, never in the web process that takes a manual run. To try it, start a "
                f"conversation that offers '{tool.name}' and ask for something that needs it; the run's trace "
                "in the admin shows the call and its result.")
    return None


def run_tool_by_hand(tool: Tool, arguments: dict[str, Any], *, user_id: int) -> ToolResult:
    """Execute ``tool`` once, as a run would, on behalf of user ``user_id``.

    The user's secrets fill an HTTP tool's ``${NAME}`` placeholders, exactly
    as for that user's own runs. The call blocks for at most the tool's
    attempts times its timeout, plus backoff. Raises ``NotRunnableByHand``
    for a tool that cannot run here (``by_hand_refusal``).
    """
    refusal = by_hand_refusal(tool)
    if refusal is not None:
        raise NotRunnableByHand(refusal)
    registry = ToolRegistry()
    registry.register(tool)
    return execute_tool(registry, tool.name, arguments, context=tool_context_for(user_id=user_id))
