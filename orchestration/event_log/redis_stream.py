"""One Redis Stream per run, written with plain redis (``XADD``).

Stream entry ids are ``0-<seq>``: the seq is the id, so reading "after N" is
``XREAD`` from ``0-N`` and ordering by seq is Redis' own ordering. The seq
counter, the dedupe set and the terminal marker are updated in the same Lua
script as the ``XADD``, so concurrent workers never interleave, skip or
repeat a seq. All keys of a run share a hash tag to stay on one cluster slot.
"""

from __future__ import annotations

import json

import redis
import redis.asyncio as aioredis

from .base import Event

_APPEND = """
if redis.call('EXISTS', KEYS[4]) == 1 then return 0 end
if ARGV[2] ~= '' then
  if redis.call('SADD', KEYS[3], ARGV[2]) == 0 then return -1 end
end
local seq = redis.call('INCR', KEYS[2])
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[4], '0-' .. seq, 'e', ARGV[1])
local ttl = ARGV[5]
if ARGV[3] == '1' then
  redis.call('SET', KEYS[4], seq)
  ttl = ARGV[6]
end
for i = 1, 4 do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('EXPIRE', KEYS[i], ttl) end
end
return seq
"""


# Blocking reads wait at most MAX_BLOCK_MS; the socket timeout must be longer
# (redis-py's default of 5 s would cut a 5 s XREAD BLOCK short).
MAX_BLOCK_MS = 10_000
SOCKET_TIMEOUT_S = 30.0


def _keys(run_id: str) -> list[str]:
    base = f"cf:run:{{{run_id}}}"
    return [f"{base}:events", f"{base}:seq", f"{base}:dedupe", f"{base}:ended"]


def _decode(entries: list) -> list[Event]:
    events: list[Event] = []
    for entry_id, fields in entries:
        if isinstance(entry_id, bytes):
            entry_id = entry_id.decode()
        seq = int(entry_id.split("-", 1)[1])
        payload = fields.get(b"e") if b"e" in fields else fields.get("e")
        event = json.loads(payload)
        events.append({"seq": seq, **event})
    return events


class RedisStreamEventLog:
    def __init__(self, *, url: str, active_ttl_s: int, ended_ttl_s: int, max_len: int) -> None:
        self._url = url
        self._active_ttl_s = active_ttl_s
        self._ended_ttl_s = ended_ttl_s
        self._max_len = max_len
        self._client = redis.Redis.from_url(url, socket_timeout=SOCKET_TIMEOUT_S)
        self._append = self._client.register_script(_APPEND)
        # One async client per event loop: redis.asyncio connections are bound
        # to the loop that created them.
        self._async_clients: dict[int, aioredis.Redis] = {}

    def append(
        self, run_id: str, event: Event, *, dedupe_key: str | None = None, terminal: bool = False
    ) -> int | None:
        result = self._append(
            keys=_keys(run_id),
            args=[
                json.dumps(event, separators=(",", ":"), ensure_ascii=False),
                dedupe_key or "",
                "1" if terminal else "0",
                self._max_len,
                self._active_ttl_s,
                self._ended_ttl_s,
            ],
        )
        seq = int(result)
        return seq if seq > 0 else None

    def read(self, run_id: str, *, after: int, block_ms: int = 0, count: int = 500) -> list[Event]:
        stream = _keys(run_id)[0]
        block = min(block_ms, MAX_BLOCK_MS) or None
        reply = self._client.xread({stream: f"0-{after}"}, count=count, block=block)
        return _decode(reply[0][1]) if reply else []

    async def aread(
        self, run_id: str, *, after: int, block_ms: int = 0, count: int = 500
    ) -> list[Event]:
        stream = _keys(run_id)[0]
        block = min(block_ms, MAX_BLOCK_MS) or None
        reply = await self._async_client().xread({stream: f"0-{after}"}, count=count, block=block)
        return _decode(reply[0][1]) if reply else []

    def _async_client(self) -> aioredis.Redis:
        import asyncio

        loop_id = id(asyncio.get_running_loop())
        client = self._async_clients.get(loop_id)
        if client is None:
            client = aioredis.Redis.from_url(self._url, socket_timeout=SOCKET_TIMEOUT_S)
            self._async_clients[loop_id] = client
        return client

    def delete(self, run_id: str) -> None:
        """Drop a run's log (tests and operators; clients then need a snapshot)."""
        self._client.delete(*_keys(run_id))
