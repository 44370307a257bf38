"""Worker liveness in Redis: which worker processes are alive, and which
were declared lost.

A step's lease in Postgres (``heartbeat_at``, renewed every
CHATFORGE_HEARTBEAT_S) tells that a step was lost only after
CHATFORGE_RUN_STALL_S, a minute by default: renewing it every second
instead would be one database write per running step per second. Here each
worker *process* (a prefork child, a gevent or threads worker) renews one
entry, every CHATFORGE_LIVENESS_S, whatever it runs: the sorted set
``workers`` maps the process's owner name to the time of its last renewal,
read off the Redis server's clock (``TIME`` inside the script), so hosts
whose clocks disagree still agree on who is late. The steps a process holds
are found in Postgres, where each claim writes its owner name
(``lease_owner``) in the statement that takes the step: there is no moment
between a claim and its listing when a loss would go unnoticed.

A process whose entry is older than CHATFORGE_WORKER_LOST_S is lost. One
process of the fleet at a time (whoever takes the ``watch`` key in its
renewal) looks for lost ones; declaring one lost moves it from ``workers``
to ``lost`` and leaves a tombstone, in one script, so that a process that
was only cut off (a partition that heals) learns at its next renewal that
its steps were given away and abandons them instead of finishing them
twice. Its entry in ``lost`` stays until its steps were sent on
(``settle``), so a watcher that dies half-way is followed by the next.

All keys share one hash tag, so the scripts also run on a Redis Cluster.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass

import redis

_TAG = "{chatforge-liveness}"
WORKERS = f"chatforge:liveness:{_TAG}:workers"  # owner -> last renewal, ms (Redis clock)
LOST = f"chatforge:liveness:{_TAG}:lost"  # owner -> when declared lost, ms; until settled
WATCH = f"chatforge:liveness:{_TAG}:watch"  # who looks for lost workers this interval
TOMBSTONE_TTL_S = 86_400  # a lost process that comes back within a day is told


def tombstone_key(owner: str) -> str:
    return f"chatforge:liveness:{_TAG}:dead:{owner}"


def owner_name(node: str) -> str:
    """A name for this process that no other process has or will have:
    the Celery node (``llm@host-a``, unique across hosts), the pid and a
    random part (a pid is reused; a process that was declared lost takes a
    new name). At most 63 characters: it is also the process's Postgres
    ``application_name``, so the watcher can end a lost process's sessions."""
    return f"{node[:44]}/{os.getpid()}/{secrets.token_hex(3)}"


# KEYS: workers, tombstone, watch. ARGV: owner, watch ms, whether the
# process may look for lost ones (1/0). Returns {alive, watcher}: alive 0
# means the process was declared lost (it must abandon what it holds).
_RENEW = """
if redis.call('EXISTS', KEYS[2]) == 1 then return {0, 0} end
local t = redis.call('TIME')
redis.call('ZADD', KEYS[1], t[1] * 1000 + math.floor(t[2] / 1000), ARGV[1])
local watcher = 0
if ARGV[3] == '1' and redis.call('SET', KEYS[3], ARGV[1], 'NX', 'PX', ARGV[2]) then watcher = 1 end
return {1, watcher}
"""

# KEYS: workers, lost. ARGV: lost ms, settle-retry ms, limit. Owners whose
# last renewal is older than the lost threshold, and owners declared lost
# whose steps were not settled within the retry period.
_LAPSED = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local late = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]), 'LIMIT', 0, tonumber(ARGV[3]))
local unsettled = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[2]), 'LIMIT', 0, tonumber(ARGV[3]))
return {late, unsettled}
"""

# KEYS: workers, lost, tombstone. ARGV: owner, lost ms, tombstone s.
# Declares the owner lost unless it renewed since it was found late (1), or
# hands out again one declared before and not settled (1); 0 otherwise.
_DECLARE_LOST = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then
  if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
    redis.call('ZADD', KEYS[2], now, ARGV[1])
    return 1
  end
  return 0
end
if tonumber(score) > now - tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], now, ARGV[1])
redis.call('SET', KEYS[3], '1', 'EX', ARGV[3])
return 1
"""


@dataclass(frozen=True)
class Renewal:
    alive: bool  # False: declared lost while it could not renew
    watcher: bool  # this process looks for lost workers this interval


class LivenessRegistry:
    """The liveness keys of one Redis (the broker's)."""

    def __init__(self, client: redis.Redis, *, lost_s: float, interval_s: float) -> None:
        self._client = client
        self.lost_ms = int(lost_s * 1000)
        self.interval_ms = int(interval_s * 1000)
        self._renew = client.register_script(_RENEW)
        self._lapsed = client.register_script(_LAPSED)
        self._declare = client.register_script(_DECLARE_LOST)

    # -- a worker process's side ----------------------------------------------

    def renew(self, owner: str, *, may_watch: bool = True) -> Renewal:
        """Renew the owner's entry; one round trip. The watch key lasts a
        little less than an interval, so some process takes it each interval
        (of those that ``may_watch``)."""
        watch_ms = max(1, int(self.interval_ms * 0.9))
        alive, watcher = self._renew(keys=[WORKERS, tombstone_key(owner), WATCH],
                                     args=[owner, watch_ms, int(may_watch)])
        return Renewal(alive=bool(alive), watcher=bool(watcher))

    def leave(self, owner: str) -> None:
        """A process that stops cleanly: nothing of it to look after."""
        self._client.zrem(WORKERS, owner)

    # -- the watcher's side -----------------------------------------------------

    def lapsed(self, *, limit: int = 100) -> list[str]:
        """Owners to look at: late ones, and lost ones not yet settled (their
        watcher stopped half-way) for longer than a few intervals."""
        retry_ms = max(self.lost_ms, 5 * self.interval_ms)
        late, unsettled = self._lapsed(keys=[WORKERS, LOST], args=[self.lost_ms, retry_ms, limit])
        return list(dict.fromkeys(_text(owner) for owner in [*late, *unsettled]))

    def declare_lost(self, owner: str) -> bool:
        """Declare ``owner`` lost (or hand out again one declared before and
        not settled): True when its steps are now the caller's to send on;
        False when it renewed since it was found late (it is alive)."""
        return bool(self._declare(keys=[WORKERS, LOST, tombstone_key(owner)],
                                  args=[owner, self.lost_ms, TOMBSTONE_TTL_S]))

    def settle(self, owner: str) -> None:
        """The lost owner's steps were sent on: forget it (its tombstone stays)."""
        self._client.zrem(LOST, owner)

    def settled_for(self, seconds: float) -> bool:
        """Whether this Redis has been up for at least ``seconds``. Right
        after a restart every entry looks late (they were renewed before it
        went down, or are gone): no process is declared lost until each has
        had time to renew."""
        return float(self._client.info("server").get("uptime_in_seconds", 0)) >= seconds


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
