"""Running one tool by hand, outside any run: the admin's "Run with
arguments" page and ``POST /api/tools/{name}/invoke/``.

Both run the tool through the same executor as a run's call (argument
checks, timeout, retries, results the model could read) with the calling
person's identity and secrets, so what an operator tries is what a run
would get. Which tool they may run differs, and is the caller's to decide:
the admin finds any configured tool, even one runs are not offered
(``chatforge.catalog.tool_runs.find_runnable_tool``); the API only the
catalog's.
"""

from __future__ import annotations

from typing import Any

from orchestration.services.tool_context import tool_context_for
from tools.base import Tool
from tools.executor import ToolResult, execute_tool
from tools.registry import ToolRegistry


def run_tool_by_hand(tool: Tool, arguments: dict[str, Any], *, user_id: int) -> ToolResult:
    """Execute ``tool`` once, as a run would, on behalf of user ``user_id``.

    The user's secrets fill an HTTP tool's ``${NAME}`` placeholders, exactly
    as for that user's own runs. The call blocks for at most the tool's
    attempts times its timeout, plus backoff.
    """
    registry = ToolRegistry()
    registry.register(tool)
    return execute_tool(registry, tool.name, arguments, context=tool_context_for(user_id=user_id))
