"""Tools that only tests and benchmarks load (CHATFORGE_TOOL_MODULES=tests.support.tools)."""

from __future__ import annotations

import time

from tools.base import Tool, ToolContext, ToolPolicy


def _slow_sleep(args: dict, ctx: ToolContext) -> dict:
    time.sleep(args["ms"] / 1000)
    return {"slept_ms": args["ms"]}


TOOLS = [
    Tool(
        name="slow_sleep",
        description="Sleep for ms milliseconds (stands for real tool work in tests and benchmarks).",
        parameters={
            "type": "object",
            "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": 60_000}},
            "required": ["ms"],
            "additionalProperties": False,
        },
        handler=_slow_sleep,
        policy=ToolPolicy(timeout_s=90),
    )
]
