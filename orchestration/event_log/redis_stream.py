"""One Redis Stream per run, written with plain redis (``XADD``).

Stream entry ids are ``0-<seq>``: the seq is the id, so reading "after N" is
``XREAD`` from ``0-N`` and ordering by seq is Redis' own ordering. The seq
counter, the dedupe set and the terminal marker are updated in the same Lua
script as the ``XADD``, so concurrent workers never interleave, skip or
repeat a seq. All keys of a run share a hash tag to stay on one cluster slot.

A log that is missing when an event is appended is created in one of two
ways (``continuity.py`` decides which): *fresh*, counting from 1 — the run's
first event — or *restarted*, counting from a floor taken from Redis' clock
in microseconds, above any seq the lost log can have handed out (a log
gets far fewer than one event per microsecond). Readers see the jump and
send a snapshot (``orchestration/services/run_follower.py``).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Sequence
from typing import TypeVar

import redis
import redis.asyncio as aioredis
from redis.exceptions import NoScriptError, ResponseError

from . import codec
from .append_group import AppendGroup
from .base import Event, FreshLogPolicy, LogInfo, PendingAppend
from .stream_follower import StreamFollower

# KEYS: events stream, seq counter, dedupe set, terminal marker.
# ARGV: event json, dedupe key, terminal flag, max len, active ttl, ended ttl,
#       creation mode: '' (refuse to create: return -2), 'fresh' or 'restart'.
_APPEND = """
if redis.call('EXISTS', KEYS[4]) == 1 then return 0 end
if redis.call('EXISTS', KEYS[2]) == 0 then
  if ARGV[7] == '' then return -2 end
  if ARGV[7] == 'restart' then
    local now = redis.call('TIME')
    redis.call('SET', KEYS[2], now[1] .. string.format('%06d', tonumber(now[2])))
  end
end
if ARGV[2] ~= '' then
  if redis.call('SADD', KEYS[3], ARGV[2]) == 0 then return -1 end
end
local seq = redis.call('INCR', KEYS[2])
local id = string.format('%d', seq)
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[4], '0-' .. id, 'e', ARGV[1])
local ttl = ARGV[5]
if ARGV[3] == '1' then
  redis.call('SET', KEYS[4], id)
  ttl = ARGV[6]
end
for i = 1, 4 do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('EXPIRE', KEYS[i], ttl) end
end
return seq
"""

_LOG_MISSING = -2

# Blocking reads wait at most MAX_BLOCK_MS; the socket timeout must be longer
# (redis-py's default of 5 s would cut a 5 s XREAD BLOCK short).
MAX_BLOCK_MS = 10_000
SOCKET_TIMEOUT_S = 30.0


def _start_mode(starts_log: bool) -> str:
    """The append script's last argument: "fresh" creates a missing log at
    seq 1 (the run's first event); "" reports it missing instead."""
    return "fresh" if starts_log else ""


def _keys(run_id: str) -> list[str]:
    base = f"cf:run:{{{run_id}}}"
    return [f"{base}:events", f"{base}:seq", f"{base}:dedupe", f"{base}:ended"]


def _seq_of(entry_id: bytes | str) -> int:
    if isinstance(entry_id, bytes):
        entry_id = entry_id.decode()
    return int(entry_id.split("-", 1)[1])


def _decode(entries: list) -> list[Event]:
    events: list[Event] = []
    for entry_id, fields in entries:
        payload = fields.get(b"e") if b"e" in fields else fields.get("e")
        event = codec.decode(payload)
        events.append({"seq": _seq_of(entry_id), **event})
    return events


def _info(first: list, last: list, ended: int) -> LogInfo:
    if not first:
        return LogInfo(exists=False, ended=bool(ended))
    return LogInfo(exists=True, first_seq=_seq_of(first[0][0]), last_seq=_seq_of(last[0][0]), ended=bool(ended))


T = TypeVar("T")


def _of_this_loop(cache: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T], make: Callable[[], T]) -> T:
    """The running event loop's entry of ``cache``, made on first use
    (redis.asyncio connections, and so what reads through them, are bound
    to the loop that created them)."""
    loop = asyncio.get_running_loop()
    value = cache.get(loop)
    if value is None:
        value = cache[loop] = make()
    return value


class RedisStreamEventLog:
    def __init__(
        self,
        *,
        url: str,
        active_ttl_s: int,
        ended_ttl_s: int,
        max_len: int,
        max_connections: int | None = None,
        may_start_fresh: FreshLogPolicy | None = None,
    ) -> None:
        self._url = url
        # Per pool (one sync pool, one async pool per event loop). A web
        # process's blocking reads share one XREAD (StreamFollower); the
        # ceiling matters for the reads that do not wait.
        self._client_options = {"socket_timeout": SOCKET_TIMEOUT_S, "max_connections": max_connections}
        self._active_ttl_s = active_ttl_s
        self._ended_ttl_s = ended_ttl_s
        self._max_len = max_len
        # Without a policy every missing log starts at 1 (unit tests of the backend).
        self._may_start_fresh = may_start_fresh or (lambda run_id, event: True)
        self._client = redis.Redis.from_url(url, **self._client_options)
        self._append = self._client.register_script(_APPEND)
        # Concurrent appends of this process (the LLM worker's streaming
        # turns) go to Redis together: append_group.py.
        self._group = AppendGroup(self._send_appends, interrupted=redis.ConnectionError)
        # One async client per event loop: redis.asyncio connections are bound
        # to the loop that created them. Keyed by the loop itself (weakly), not
        # its id: a new loop may reuse a closed one's id.
        self._async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.Redis] = (
            weakref.WeakKeyDictionary()
        )
        self._followers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, StreamFollower] = (
            weakref.WeakKeyDictionary()
        )

    def _args(self, event: Event, dedupe_key: str | None, terminal: bool) -> list:
        return [
            codec.encode(event),
            dedupe_key or "",
            "1" if terminal else "0",
            self._max_len,
            self._active_ttl_s,
            self._ended_ttl_s,
        ]

    def _append_to_missing_log(self, run_id: str, event: Event, args: list) -> int:
        """The log is missing: it may start at 1 or must continue above a floor."""
        mode = "fresh" if self._may_start_fresh(run_id, event) else "restart"
        return int(self._append(keys=_keys(run_id), args=[*args, mode]))

    def append(
        self, run_id: str, event: Event, *, dedupe_key: str | None = None, terminal: bool = False,
        starts_log: bool = False,
    ) -> int | None:
        # A run's first event creates its log in one call; any other append
        # to a missing log asks the policy first (the log may have been lost).
        return self.append_many(
            [PendingAppend(run_id, event, dedupe_key=dedupe_key, terminal=terminal, starts_log=starts_log)]
        )[0]

    def append_many(self, appends: Sequence[PendingAppend]) -> list[int | None]:
        """In one pipeline, with whatever other threads or greenlets of the
        process append meanwhile (``AppendGroup``). An append the server
        refused because it does not know the script (Redis restarted) and an
        append that found its log missing are done again on their own, by
        their caller."""
        items = [(append, self._args(append.event, append.dedupe_key, append.terminal)) for append in appends]
        replies = self._group.submit(items)
        seqs = [self._finish_append(append, args, reply) for (append, args), reply in zip(items, replies, strict=True)]
        return [seq if seq > 0 else None for seq in seqs]

    def _send_appends(self, items: list[tuple[PendingAppend, list]]) -> list:
        """One pipeline of ``EVALSHA`` of the append script; the raw replies.
        Not through redis-py's pipelined ``Script``, which asks ``SCRIPT
        EXISTS`` before every pipeline (a second round trip each time)."""
        if len(items) == 1:  # alone: a plain command costs less than a pipeline of one
            append, args = items[0]
            keys = _keys(append.run_id)
            try:
                return [self._client.evalsha(self._append.sha, len(keys), *keys, *args, _start_mode(append.starts_log))]
            except ResponseError as exc:  # as the pipeline hands them back: NoScriptError, a script error
                return [exc]
        pipe = self._client.pipeline(transaction=False)
        for append, args in items:
            keys = _keys(append.run_id)
            pipe.evalsha(self._append.sha, len(keys), *keys, *args, _start_mode(append.starts_log))
        return pipe.execute(raise_on_error=False)

    def _finish_append(self, append: PendingAppend, args: list, reply: object) -> int:
        if isinstance(reply, NoScriptError):  # loads the script
            reply = self._append(keys=_keys(append.run_id), args=[*args, _start_mode(append.starts_log)])
        elif isinstance(reply, Exception):
            raise reply
        seq = int(reply)
        if seq == _LOG_MISSING:
            seq = self._append_to_missing_log(append.run_id, append.event, args)
        return seq

    def read(self, run_id: str, *, after: int, block_ms: int = 0, count: int = 500) -> list[Event]:
        stream = _keys(run_id)[0]
        block = min(block_ms, MAX_BLOCK_MS) or None
        reply = self._client.xread({stream: f"0-{after}"}, count=count, block=block)
        return _decode(reply[0][1]) if reply else []

    async def aread(
        self, run_id: str, *, after: int, block_ms: int = 0, count: int = 500
    ) -> list[Event]:
        """A read that waits goes through the event loop's follower: one
        ``XREAD`` for every stream the process's readers wait on."""
        stream = _keys(run_id)[0]
        if block_ms <= 0:
            return await self._read_now(stream, after, count)
        return await self._follower().read(stream, after=after, block_ms=min(block_ms, MAX_BLOCK_MS), count=count)

    async def _read_now(self, stream: str, after: int, count: int) -> list[Event]:
        reply = await self._async_client().xread({stream: f"0-{after}"}, count=count)
        return _decode(reply[0][1]) if reply else []

    def _follower(self) -> StreamFollower:
        return _of_this_loop(
            self._followers,
            lambda: StreamFollower(
                self._async_client(), decode=_decode, read_now=self._read_now, max_block_ms=MAX_BLOCK_MS
            ),
        )

    def info(self, run_id: str) -> LogInfo:
        stream, _, _, ended = _keys(run_id)
        with self._client.pipeline(transaction=True) as pipe:
            pipe.xrange(stream, count=1).xrevrange(stream, count=1).exists(ended)
            first, last, is_ended = pipe.execute()
        return _info(first, last, is_ended)

    async def ainfo(self, run_id: str) -> LogInfo:
        stream, _, _, ended = _keys(run_id)
        async with self._async_client().pipeline(transaction=True) as pipe:
            pipe.xrange(stream, count=1).xrevrange(stream, count=1).exists(ended)
            first, last, is_ended = await pipe.execute()
        return _info(first, last, is_ended)

    def _async_client(self) -> aioredis.Redis:
        return _of_this_loop(self._async_clients, lambda: aioredis.Redis.from_url(self._url, **self._client_options))

    def delete(self, run_id: str) -> None:
        """Drop a run's log, as an expiry or a Redis wipe would (tests and
        operators; clients then get a snapshot from Postgres)."""
        self._client.delete(*_keys(run_id))
