"""Fleet-wide caps on running steps: admission, hand-off and leases in Redis.

A step (a model turn or a tool call) falls under up to three *scopes* —
its user, its run's assistant and, for a tool call, its tool — each with a
cap on how many of its steps may run at once across every host. A step is
*admitted* before its message is sent to the broker: when every scope has
room, it takes a slot in each (one Lua script: atomic however many hosts ask
at once) and is sent; otherwise it is *parked* in each scope's line and
nothing is sent, so a capped user's backlog holds no worker and sits in no
queue in front of anyone else's steps.

When a step ends, its slots are given back and, in the same script, the
oldest parked steps of those scopes that now fit everywhere are admitted
(the *hand-off*); the caller sends them. Nothing waits for a slot that is
free: admission and hand-off are one atomic decision each, so no release
can slip between a park and its wake-up.

Slots are leases: each expires CHATFORGE_RUN_STALL_S after its last renewal
(the step heartbeat renews them), so a worker that dies holding one frees it
without anyone's help; the sweeper's pass then runs the hand-off for every
scope with a line (``wake_parked``). If Redis loses everything (restart,
flush), parked steps go with the broker's queues and the sweeper re-drives
every active run (``broker_loss.py``), which admits them again.

Embedded mode (one process, in-memory broker) admits every step.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import redis
from django.conf import settings

from chatforge.scheduling.limits import current_limits
from chatforge.workers.broker_client import broker_client

# One hash tag: every key of the scheduler lives in one Redis Cluster slot,
# so the scripts may touch keys they compute.
PREFIX = "chatforge:{sched}:"
# How many parked steps one hand-off looks at per scope (the oldest first).
_HANDOFF_SCAN = 64
# A parked step's description outlives any sensible wait; the sweeper's
# broker-loss pass re-drives runs whose parked step vanished.
_PARKED_TTL_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class StepSlot:
    """A step's identity in the scheduler and the scopes it falls under."""

    step_id: str
    scopes: tuple[tuple[str, int], ...]  # (scope, cap), caps > 0 only

    @property
    def limited(self) -> bool:
        return bool(self.scopes)


@dataclass(frozen=True)
class Admitted:
    """A parked step the hand-off admitted: the caller sends it."""

    run_id: str
    task: str
    args: list


def cap_of(scope: str) -> int:
    """The cap in force for a scope ("user:<id>", "assistant:<name>",
    "tool:<name>"); 0: none."""
    kind, _, name = scope.partition(":")
    limits = current_limits()
    if kind == "user":
        return limits.user_running_cap(int(name))
    if kind == "assistant":
        return limits.assistants.get(name, 0)
    if kind == "tool":
        return limits.tool(name).max_concurrency or 0
    return 0


def _scopes(user_id: int, assistant: str, tool_name: str | None) -> tuple[tuple[str, int], ...]:
    if not current_limits().caps_running_steps:
        return ()
    names = [f"user:{user_id}"]
    if assistant:
        names.append(f"assistant:{assistant}")
    if tool_name is not None:
        names.append(f"tool:{tool_name}")
    return tuple((scope, cap) for scope in names if (cap := cap_of(scope)) > 0)


def turn_step_id(run_id: str, iteration: int) -> str:
    return f"turn:{run_id}:{iteration}"


def call_step_id(run_id: str, tool_call_id: str) -> str:
    return f"call:{run_id}:{tool_call_id}"


def turn_slot(run_id: str, iteration: int, *, user_id: int, assistant: str) -> StepSlot:
    return StepSlot(turn_step_id(run_id, iteration), _scopes(user_id, assistant, None))


def call_slot(run_id: str, tool_call_id: str, *, user_id: int, assistant: str, tool_name: str) -> StepSlot:
    return StepSlot(call_step_id(run_id, tool_call_id), _scopes(user_id, assistant, tool_name))


# --- the scripts. Keys: PREFIX..'sem:'..scope (ZSET step → lease expiry, ms),
# PREFIX..'wait:'..scope (ZSET step → its place in line, lowest first), PREFIX..'cap' (HASH scope → cap, the latest any admission
# saw), PREFIX..'step:'..step (what to send when admitted and which scopes
# it holds: {run, task, args, scopes}), PREFIX..'lines' (SET of scopes with
# a line).

_COMMON = """
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local lease = tonumber(ARGV[3])

local function room(scope, step)
  local sem = prefix .. 'sem:' .. scope
  redis.call('ZREMRANGEBYSCORE', sem, '-inf', now)
  if redis.call('ZSCORE', sem, step) then return true end
  local cap = tonumber(redis.call('HGET', prefix .. 'cap', scope) or '0')
  return cap <= 0 or redis.call('ZCARD', sem) < cap
end

local function take(scopes, step)
  for _, scope in ipairs(scopes) do
    redis.call('ZADD', prefix .. 'sem:' .. scope, now + lease, step)
    redis.call('ZREM', prefix .. 'wait:' .. scope, step)
  end
end

-- Admit the oldest parked steps of ``scope`` that fit in all their scopes.
local function handoff(scope, admitted)
  local line = prefix .. 'wait:' .. scope
  local parked = redis.call('ZRANGE', line, 0, %(scan)d - 1)
  for _, step in ipairs(parked) do
    local raw = redis.call('GET', prefix .. 'step:' .. step)
    if not raw then
      redis.call('ZREM', line, step)
    else
      local wanted = cjson.decode(raw)
      local fits = true
      for _, s in ipairs(wanted['scopes']) do
        if not room(s, step) then fits = false; break end
      end
      if fits then
        take(wanted['scopes'], step)
        table.insert(admitted, raw)
      elseif not room(scope, step) then
        break  -- this scope is full again: the rest wait for the next release
      end
    end
  end
  if redis.call('ZCARD', line) == 0 then redis.call('SREM', prefix .. 'lines', scope) end
end
""" % {"scan": _HANDOFF_SCAN}

# ARGV: prefix, now, lease, step, description (JSON), place in line, then
# scope, cap pairs. The description stays while the step is parked or holds
# its slots: a release or renewal finds the step's scopes in it.
_ADMIT = _COMMON + """
local step, description, place = ARGV[4], ARGV[5], ARGV[6]
local scopes = {}
for i = 7, #ARGV, 2 do
  redis.call('HSET', prefix .. 'cap', ARGV[i], ARGV[i + 1])
  table.insert(scopes, ARGV[i])
end
redis.call('SET', prefix .. 'step:' .. step, description, 'PX', %(ttl)d)
for _, scope in ipairs(scopes) do
  if not room(scope, step) then
    for _, s in ipairs(scopes) do
      redis.call('ZADD', prefix .. 'wait:' .. s, 'NX', place, step)
      redis.call('SADD', prefix .. 'lines', s)
    end
    return 0
  end
end
take(scopes, step)
return 1
""" % {"ttl": _PARKED_TTL_MS}

# ARGV: prefix, now, lease, step. Gives its slots back; returns what the
# hand-off admitted, for the caller to send.
_RELEASE = _COMMON + """
local step = ARGV[4]
local admitted = {}
local raw = redis.call('GET', prefix .. 'step:' .. step)
if not raw then return admitted end
local scopes = cjson.decode(raw)['scopes']
redis.call('DEL', prefix .. 'step:' .. step)
for _, scope in ipairs(scopes) do
  redis.call('ZREM', prefix .. 'sem:' .. scope, step)
  redis.call('ZREM', prefix .. 'wait:' .. scope, step)
end
for _, scope in ipairs(scopes) do handoff(scope, admitted) end
return admitted
"""

# ARGV: prefix, now, lease, then scope, cap pairs: the caps in force now for
# the scopes with a line (an admin may have raised or removed one), then the
# hand-off for each of them.
_WAKE = _COMMON + """
local admitted = {}
for i = 4, #ARGV, 2 do redis.call('HSET', prefix .. 'cap', ARGV[i], ARGV[i + 1]) end
for i = 4, #ARGV, 2 do handoff(ARGV[i], admitted) end
return admitted
"""

# ARGV: prefix, now, lease, then steps: extend the slots they hold (XX: a
# slot given back a moment ago is not taken again).
_RENEW = _COMMON + """
for i = 4, #ARGV do
  local raw = redis.call('GET', prefix .. 'step:' .. ARGV[i])
  if raw then
    for _, scope in ipairs(cjson.decode(raw)['scopes']) do
      redis.call('ZADD', prefix .. 'sem:' .. scope, 'XX', now + lease, ARGV[i])
    end
  end
end
return 1
"""


class RedisSlots:
    """The scheduler on the broker's Redis (shared by every host)."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._admit = client.register_script(_ADMIT)
        self._release = client.register_script(_RELEASE)
        self._wake = client.register_script(_WAKE)
        self._renew = client.register_script(_RENEW)

    @staticmethod
    def _head() -> list:
        return [PREFIX, int(time.time() * 1000), int(settings.CHATFORGE_RUN_STALL_S * 1000)]

    def admit(self, slot: StepSlot, *, run_id: str, task: str, args: list, place: int) -> bool:
        """Take a slot in every scope (True: send it now), or park the step
        (False) at ``place`` in each scope's line (lowest first; dispatch
        orders by the run's creation time, so the next step of a run under
        way goes before the first step of a newer run of the same user)."""
        if not slot.limited:
            return True
        description = json.dumps({"run": run_id, "task": task, "args": args,
                                  "scopes": [scope for scope, _ in slot.scopes]})
        pairs = [item for scope, cap in slot.scopes for item in (scope, cap)]
        return bool(self._admit(args=[*self._head(), slot.step_id, description, place, *pairs]))

    def release(self, step_id: str) -> list[Admitted]:
        """Give the step's slots back (if it holds any); the parked steps
        that now fit are admitted."""
        return _decoded(self._release(args=[*self._head(), step_id]))

    def wake(self) -> list[Admitted]:
        """The hand-off for every scope with a line, under the caps in force
        now: slots whose lease lapsed (a dead worker's) and caps an admin
        raised or removed let parked steps go."""
        scopes = [raw.decode() for raw in self._client.smembers(PREFIX + "lines")]
        if not scopes:
            return []
        pairs = [item for scope in scopes for item in (scope, cap_of(scope))]
        return _decoded(self._wake(args=[*self._head(), *pairs]))

    def renew(self, step_ids: list[str]) -> None:
        if step_ids:
            self._renew(args=[*self._head(), *step_ids])

    def is_parked(self, step_id: str) -> bool:
        """Whether the step waits in line (the sweeper leaves it there)."""
        raw = self._client.get(PREFIX + "step:" + step_id)
        if raw is None:
            return False
        scopes = json.loads(raw)["scopes"]
        return bool(scopes) and self._client.zscore(PREFIX + "wait:" + scopes[0], step_id) is not None

    def running(self, scope: str) -> int:
        """Steps holding a slot of ``scope`` now (tests, the admin)."""
        key = PREFIX + "sem:" + scope
        self._client.zremrangebyscore(key, "-inf", int(time.time() * 1000))
        return int(self._client.zcard(key))

    def parked(self, scope: str) -> int:
        return int(self._client.zcard(PREFIX + "wait:" + scope))


def _decoded(raw: list) -> list[Admitted]:
    admitted = []
    for item in raw:
        wanted = json.loads(item)
        admitted.append(Admitted(run_id=wanted["run"], task=wanted["task"], args=wanted["args"]))
    return admitted


class Unlimited:
    """Embedded mode: one process, every step admitted at once."""

    def admit(self, slot: StepSlot, *, run_id: str, task: str, args: list, place: int) -> bool:
        return True

    def release(self, step_id: str) -> list[Admitted]:
        return []

    def wake(self) -> list[Admitted]:
        return []

    def renew(self, step_ids: list[str]) -> None:
        return None

    def is_parked(self, step_id: str) -> bool:
        return False


_scheduler: RedisSlots | Unlimited | None = None


def scheduler() -> RedisSlots | Unlimited:
    global _scheduler
    if _scheduler is None:
        client = broker_client()
        _scheduler = Unlimited() if client is None else RedisSlots(client)
    return _scheduler
