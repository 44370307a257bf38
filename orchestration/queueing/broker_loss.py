"""Noticing that the broker lost everything it held.

Postgres is the outbox (decision 0007): a step's message only says "look at
this row", and the sweeper sends the next step again for any run whose
heartbeat went stale. When Redis restarts without its data or is flushed,
every queued message is gone at once; waiting for each run's heartbeat to go
stale (``CHATFORGE_RUN_STALL_S``) would be the slowest recovery there is. So
each sweeper pass sets a marker key in the broker's database if it is
missing: finding it missing means the broker was emptied since the last
pass (or this is the first pass ever), and that pass sends the next step of
every active run at once (decision 0011). Steps are idempotent, so a message
that was not lost after all is delivered twice to no effect, and a run whose
step is running under a live lease is left alone.
"""

from __future__ import annotations

import logging
import time

import redis

from chatforge.workers.broker_client import broker_client

logger = logging.getLogger(__name__)

MARKER_KEY = "chatforge:broker-marker"

def broker_was_emptied() -> bool:
    """Whether the broker lost its queues since the last call anywhere: the
    marker was missing (Redis restarted empty, was flushed or evicted the
    key; or this is the first call). Setting it in the same command makes
    exactly one caller answer True per loss. False when the broker cannot be
    reached: nothing can be sent then, and the next pass asks again."""
    client = broker_client()
    if client is None:
        return False
    try:
        return bool(client.set(MARKER_KEY, str(time.time()), nx=True))
    except redis.RedisError as exc:
        logger.warning("could not look for lost queues on the broker (%s); the next sweep will", exc)
        return False
