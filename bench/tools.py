"""A benchmark tool that stands for real tool work: it sleeps for ``ms``.

Loaded by the benchmark's workers through CHATFORGE_TOOL_MODULES=bench.tools.
"""

from __future__ import annotations

import time

from tools.base import Tool, ToolContext, ToolPolicy


def _sleep(args: dict, ctx: ToolContext) -> dict:
    time.sleep(args["ms"] / 1000)
    return {"slept_ms": args["ms"]}


TOOLS = [
    Tool(
        name="bench_sleep",
        description="Wait for the given number of milliseconds (benchmark only).",
        parameters={
            "type": "object",
            "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": 10_000}},
            "required": ["ms"],
            "additionalProperties": False,
        },
        handler=_sleep,
        policy=ToolPolicy(timeout_s=15),
    )
]
