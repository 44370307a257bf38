"""Tools that only tests and benchmarks load (CHATFORGE_TOOL_MODULES=tests.support.tools)."""

from __future__ import annotations

import asyncio
import os
import struct
import time
import zlib

import redis

from tools.base import Tool, ToolContext, ToolPolicy
from tools.errors import ToolError, TransientToolError
from tools.files import FILE_ID

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


def _slow_effect(args: dict, ctx: ToolContext) -> dict:
    """Work that takes a while, then a side effect that must happen at most once."""
    time.sleep(args["ms"] / 1000)
    return _count_effect(args, ctx)


def _flaky_once(args: dict, ctx: ToolContext) -> str:
    """Fails transiently on the first attempt of each call, then succeeds."""
    attempt = redis.Redis.from_url(EFFECTS_REDIS_URL).incr(f"flaky:{ctx.idempotency_key}")
    if attempt == 1:
        raise TransientToolError("upstream answered 503 Service Unavailable")
    return "worked on attempt %d" % attempt


def _save_report(args: dict, ctx: ToolContext) -> dict:
    """Returns a file: a small CSV saved to the conversation (files tests)."""
    if ctx.files is None:
        raise ToolError("save_report needs a conversation")
    text = args.get("text", "city,people\nOslo,700000\n")
    info = ctx.files.save(args.get("name", "report.csv"), text.encode())
    return {"saved": info.name}


def chart_png(width: int = 96, height: int = 64) -> bytes:
    """A real PNG (an RGB gradient), so a thumbnail has pixels to show."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(
        b"\x00" + b"".join(bytes((x * 255 // width, y * 255 // height, 160)) for x in range(width))
        for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


RUN_SNIPPET_OUTPUT = "mean = 4.5\n   x   y\n0  1  2\n1  3  4"


def _run_snippet(args: dict, ctx: ToolContext) -> str:
    """Shaped like the python tool (one ``code`` argument; what it printed
    comes back, a chart as a file), without a sandbox: the chat page's code
    card is tested where no sandbox worker runs."""
    if ctx.files is None:
        raise ToolError("run_snippet needs a conversation")
    ctx.files.save("chart.png", chart_png())
    return RUN_SNIPPET_OUTPUT


def _file_size(args: dict, ctx: ToolContext) -> dict:
    """Takes a file-id argument and reads the file's bytes (files tests)."""
    if ctx.files is None:  # the executor refuses the call first; this keeps the type checker told
        raise ToolError("file_size needs a conversation")
    with ctx.files.open_bytes(args["file_id"]) as handle:
        return {"bytes": len(handle.read())}


_NO_ARGS = {"type": "object", "properties": {}, "additionalProperties": False}
_MS = {
    "type": "object",
    "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": 60_000}},
    "required": ["ms"],
    "additionalProperties": False,
}
# The I/O pool's (decision 0025): a call that waits, and handlers that hang.
_IO = ToolPolicy(timeout_s=90, pool="io")
_IO_HANGS = ToolPolicy(timeout_s=1, pool="io")

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
    Tool(name="wait_io", description="Waits ms milliseconds on the I/O pool (stands for a network call).",
         parameters=_MS, handler=_slow_sleep, policy=_IO),
    Tool(name="hang_sync_io", description="Never returns (sync, I/O pool).", parameters=_NO_ARGS,
         handler=_hang_sync, policy=_IO_HANGS),
    Tool(name="hang_async_io", description="Never returns (async, I/O pool).", parameters=_NO_ARGS,
         handler=_hang_async, policy=_IO_HANGS),
    Tool(name="hang_sync", description="Never returns (sync).", parameters=_NO_ARGS, handler=_hang_sync,
         policy=ToolPolicy(timeout_s=1)),
    Tool(name="hang_async", description="Never returns (async).", parameters=_NO_ARGS, handler=_hang_async,
         policy=ToolPolicy(timeout_s=1)),
    Tool(name="flaky_once", description="Fails once, then works.", parameters=_NO_ARGS, handler=_flaky_once,
         policy=ToolPolicy(max_attempts=3, backoff_initial_s=0.01, backoff_max_s=0.02)),
    Tool(name="count_effect", description="Records one side effect.", parameters=_NO_ARGS, handler=_count_effect,
         policy=ToolPolicy(side_effects="not_idempotent")),
    Tool(
        name="slow_effect",
        description="Works for ms milliseconds, then records one side effect.",
        parameters={
            "type": "object",
            "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": 60_000}},
            "required": ["ms"],
            "additionalProperties": False,
        },
        handler=_slow_effect,
        policy=ToolPolicy(timeout_s=90, side_effects="not_idempotent"),
    ),
    Tool(
        name="save_report",
        description="Test tool: saves a CSV file.",
        parameters={"type": "object", "properties": {"name": {"type": "string"}, "text": {"type": "string"}},
                    "additionalProperties": False},
        handler=_save_report,
        policy=ToolPolicy(side_effects="idempotent"),
    ),
    Tool(
        name="run_snippet",
        description="Test tool shaped like python: takes code, returns fixed printed text and a PNG.",
        parameters={"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"],
                    "additionalProperties": False},
        handler=_run_snippet,
        policy=ToolPolicy(side_effects="idempotent"),
    ),
    Tool(
        name="file_size",
        description="Test tool: the size of a file-id argument.",
        parameters={"type": "object", "properties": {"file_id": FILE_ID}, "required": ["file_id"],
                    "additionalProperties": False},
        handler=_file_size,
    ),
]


# --- tool result caching (docs/tools.md, "Caching") -----------------------


def _cached_lookup(args: dict, ctx: ToolContext) -> dict:
    """Counts its runs per arguments in Redis (a call served from the cache
    does not run, so does not count); fails or saves a file when asked."""
    runs = redis.Redis.from_url(EFFECTS_REDIS_URL).incr(
        "cached_lookup:" + ",".join(f"{key}={args[key]}" for key in sorted(args)))
    if args.get("fail"):
        raise ToolError("the lookup failed, as asked")
    if args.get("save"):
        if ctx.files is None:
            raise ToolError("cached_lookup saves a file only in a conversation")
        ctx.files.save("lookup.txt", b"looked up")
    return {"word": args["word"], "runs": runs}


def cached_lookup_runs(**args: object) -> int:
    """How many times a cached test tool ran with these arguments."""
    key = "cached_lookup:" + ",".join(f"{name}={args[name]}" for name in sorted(args))
    return int(redis.Redis.from_url(EFFECTS_REDIS_URL).get(key) or 0)


_LOOKUP = {
    "type": "object",
    "properties": {"word": {"type": "string"}, "nonce": {"type": "string"}, "fail": {"type": "boolean"},
                   "save": {"type": "boolean"}},
    "required": ["word"],
    "additionalProperties": False,
}

TOOLS += [
    Tool(name="cached_lookup", description="Test tool: a lookup whose results are cached per user for 5 minutes.",
         parameters=_LOOKUP, handler=_cached_lookup,
         policy=ToolPolicy(cache_ttl_s=300, cache_scope="user")),
    Tool(name="cached_lookup_global", description="Test tool: a lookup whose results anyone's calls share.",
         parameters=_LOOKUP, handler=_cached_lookup,
         policy=ToolPolicy(cache_ttl_s=300, cache_scope="global")),
    Tool(name="cached_briefly", description="Test tool: a lookup whose results are cached for 1 second.",
         parameters=_LOOKUP, handler=_cached_lookup, policy=ToolPolicy(cache_ttl_s=1)),
]
