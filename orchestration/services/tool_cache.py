"""Tool result caching (docs/tools.md, "Caching"; decision 0036): an
identical call of a read-only or idempotent tool that declares a TTL
(``ToolPolicy.cache_ttl_s``) is answered with the result stored by an
earlier call, without running the tool.

"Identical" is the key: the tool's name, a mark of what the tool is (its
author's ``version``, description and parameters schema: a changed tool
never serves an old answer), whose calls may share results (the user's, or
anyone's: ``cache_scope``), and the arguments in canonical JSON. Arguments
can hold users' data, so the key holds only a SHA-256 of all that; the tool
name stays readable for operators. A tool that reads the conversation's
files (file-id arguments, or a sandboxed tool, whose sandbox gets every
file of the conversation) gives an answer about those files: its calls are
keyed by the conversation and the files it holds too.

Only successes are stored, and only those that saved no files (the files
belong to one conversation's run). The store is Django's default cache:
Redis in distributed mode, shared by every worker; the process's memory in
embedded mode, where every worker is that process. The cache is an
optimisation: when it cannot be reached the call runs as if nothing were
cached, and a log line says so.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.core.cache import caches
from redis.exceptions import RedisError

from chatforge.observability import record
from orchestration.services.tool_files import conversation_files_for
from tools.arguments import RejectedArguments, parse_arguments
from tools.base import Tool
from tools.executor import ToolResult
from tools.files import FileInfo, declares_file_ids

logger = logging.getLogger(__name__)

# Bumped when the stored value's shape or the key's parts change: entries
# of the old shape are then never read again and expire on their own.
KEY_FORMAT = 1
KEY_PREFIX = f"chatforge:tool-cache:v{KEY_FORMAT}"
# The largest result (as JSON) worth a place in the shared cache; a bigger
# one is not stored, and the next identical call runs the tool again.
MAX_STORED_RESULT_CHARS = 1_000_000
# What a cache outage raises: Redis' errors, and the socket's own.
_UNAVAILABLE = (RedisError, OSError)


def canonical_arguments(arguments: str | dict[str, Any] | None) -> str | None:
    """The arguments as compact JSON with sorted keys, so that the same
    arguments in another key order or spacing make the same key; None when
    they are not a JSON object (the executor refuses such a call anyway)."""
    try:
        parsed = parse_arguments(arguments)
    except RejectedArguments:
        return None
    return json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def tool_mark(tool: Tool) -> str:
    """What makes two versions of a tool give the same answers: the author's
    ``version`` (a data tool's is its row's ``updated_at``), its description
    and its parameters schema. Any change to them changes every key."""
    what = json.dumps({"version": tool.version, "description": tool.description, "parameters": tool.parameters},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(what.encode()).hexdigest()


def reads_conversation_files(tool: Tool) -> bool:
    """Whether the tool's answer can depend on the conversation's files."""
    return tool.policy.sandboxed or declares_file_ids(tool.parameters)


def files_mark(files: Sequence[FileInfo]) -> str:
    """The conversation's files as a tool sees them: a file added, removed
    or whose text became readable makes another key."""
    return ",".join(sorted(f"{info.id}:{info.text_status}" for info in files))


@dataclass(frozen=True)
class CallCache:
    """The cache entry of one call: where to look its result up, and where
    to store it if the tool has to run."""

    tool: Tool
    key: str

    def lookup(self) -> ToolResult | None:
        """The stored result, marked ``cached``, or None (a miss, or the
        cache unreachable). Its ``execution_time_ms`` is the lookup's own
        time: this call ran nothing."""
        started = time.perf_counter()
        try:
            stored = caches["default"].get(self.key)
        except _UNAVAILABLE as exc:
            logger.warning("tool cache unreachable looking up a call of %s (%s: %s); running the tool",
                           self.tool.name, type(exc).__name__, exc)
            record.tool_cache_lookup(self.tool.name, "unavailable")
            return None
        entry = _valid_entry(stored)
        if entry is None:
            record.tool_cache_lookup(self.tool.name, "miss")
            return None
        record.tool_cache_lookup(self.tool.name, "hit")
        logger.info("tool %s answered from the cache (the call that stored it ran %d ms)",
                    self.tool.name, entry["execution_time_ms"])
        return ToolResult(tool_name=self.tool.name, status="success", result=entry["result"],
                          execution_time_ms=int((time.perf_counter() - started) * 1000), cached=True)

    def store(self, result: ToolResult, files: Sequence[FileInfo] = ()) -> bool:
        """Store ``result`` for the tool's TTL when it may be served again:
        a success that saved no files, small enough. Returns whether it was
        stored (False too when the cache is unreachable)."""
        if not result.success or result.cached or files:
            return False
        try:
            size = len(json.dumps(result.result, ensure_ascii=False, separators=(",", ":"), allow_nan=False))
        except (TypeError, ValueError):
            return False  # the executor turns such a value into an error first; never stored
        if size > MAX_STORED_RESULT_CHARS:
            logger.info("tool %s: result of %d characters not cached (the most is %d)", self.tool.name, size,
                        MAX_STORED_RESULT_CHARS)
            return False
        entry = {"status": result.status, "result": result.result, "execution_time_ms": result.execution_time_ms,
                 "stored_at": time.time()}
        try:
            # Redis' expiry is whole seconds: a TTL is rounded up, never to 0 ("no expiry").
            caches["default"].set(self.key, entry, timeout=max(1, math.ceil(self.tool.policy.cache_ttl_s)))
        except _UNAVAILABLE as exc:
            logger.warning("tool cache unreachable storing a result of %s (%s: %s); not cached",
                           self.tool.name, type(exc).__name__, exc)
            return False
        return True


def call_cache(tool: Tool | None, arguments: str | dict[str, Any] | None, *, user_id: int | None,
               conversation_id: str | None) -> CallCache | None:
    """The cache entry of a call of ``tool`` with ``arguments`` in a run of
    ``user_id`` in ``conversation_id``; None when its results are not cached
    (no TTL, an unknown tool, arguments that are no JSON object)."""
    if tool is None or not tool.policy.cached:
        return None
    canonical = canonical_arguments(arguments)
    if canonical is None:
        return None
    owner = "global" if tool.policy.cache_scope == "global" else f"user:{user_id}"
    files = None
    if reads_conversation_files(tool):
        handle = conversation_files_for(user_id=user_id, conversation_id=conversation_id)
        owner = f"user:{user_id}:conversation:{conversation_id}"
        files = files_mark(handle.list()) if handle is not None else ""
    digest = hashlib.sha256(json.dumps([tool_mark(tool), owner, files, canonical], separators=(",", ":"),
                                       ensure_ascii=False).encode()).hexdigest()
    return CallCache(tool=tool, key=f"{KEY_PREFIX}:{tool.name}:{digest}")


def _valid_entry(stored: object) -> dict[str, Any] | None:
    """A stored value of the shape ``store`` writes, else None (a miss)."""
    if not isinstance(stored, dict) or stored.get("status") != "success" or "result" not in stored:
        return None
    if not isinstance(stored.get("execution_time_ms"), int):
        return None
    return stored
