"""A sliding-window request count in Redis: one atomic round trip per check.

DRF's ``SimpleRateThrottle`` keeps each user's request times as a pickled
list in the cache: a read, then a write, per request. Two requests of the
same user at the same moment both read the list before either writes, so
both can pass when only one slot was left, and every POST paid two Redis
round trips and a pickle of the whole list. Here a Lua script trims the
window, counts and records the request in one step on the server, which
runs scripts one at a time: the check is atomic across every web process,
and costs one round trip.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import redis

# KEYS[1]: the sorted set of request times (member: time and a random tag,
# score: time). ARGV: now (s), window (s), limit, member.
_CHECK = """
local now, window, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count >= limit then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, count, oldest[2] or tostring(now)}
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], math.ceil(window * 1000))
return {1, count + 1, '0'}
"""


@dataclass(frozen=True)
class WindowCheck:
    allowed: bool
    count: int  # requests in the window, this one included when allowed
    retry_after_s: float | None  # when refused: until the oldest request leaves the window; else None


class RateWindow:
    """``check`` records a request under ``key`` if fewer than ``limit``
    were recorded in the last ``window_s`` seconds."""

    def __init__(self, client: redis.Redis) -> None:
        self._script = client.register_script(_CHECK)

    def check(self, key: str, *, limit: int, window_s: float, now: float) -> WindowCheck:
        member = f"{now:.6f}-{os.urandom(4).hex()}"  # two requests in the same microsecond are two
        allowed, count, oldest = self._script(keys=[key], args=[repr(now), repr(window_s), limit, member])
        if allowed:
            return WindowCheck(True, int(count), None)
        return WindowCheck(False, int(count), max(float(oldest) + window_s - now, 0.0))
