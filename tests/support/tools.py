"""Tools that only tests and benchmarks load (CHATFORGE_TOOL_MODULES=tests.support.tools)."""

from __future__ import annotations

import asyncio
import os
import time

import redis

from tools.base import Tool, ToolContext, ToolPolicy

# Where count_effect records its effects (tests read it back).
EFFECTS_REDIS_URL = os.environ.get("CHATFORGE_TEST_EFFECTS_REDIS_URL", "redis://127.0.0.1:6379/8")


def _slow_sleep(args: dict, ctx: ToolContext) -> dict:
    time.sleep(args["ms"] / 1000)
    return {"slept_ms": args["ms"]}


def _hang_sync(args: dict, ctx: ToolContext) -> str:
    time.sleep(600)
    return "woke up"


async def _hang_async(args: dict, ctx: ToolContext) -> str:
    await asyncio.sleep(600)
    return "woke up"


def _count_effect(args: dict, ctx: ToolContext) -> dict:
    """A side effect that must happen at most once per tool call."""
    count = redis.Redis.from_url(EFFECTS_REDIS_URL).incr(f"effect:{ctx.idempotency_key}")
    return {"effects_for_this_call": count}


_NO_ARGS = {"type": "object", "properties": {}, "additionalProperties": False}

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
    ),
    Tool(name="hang_sync", description="Never returns (sync).", parameters=_NO_ARGS, handler=_hang_sync,
         policy=ToolPolicy(timeout_s=1)),
    Tool(name="hang_async", description="Never returns (async).", parameters=_NO_ARGS, handler=_hang_async,
         policy=ToolPolicy(timeout_s=1)),
    Tool(name="count_effect", description="Records one side effect.", parameters=_NO_ARGS, handler=_count_effect,
         policy=ToolPolicy(side_effects="not_idempotent")),
]
