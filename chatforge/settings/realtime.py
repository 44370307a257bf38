"""Channels and the per-run event log."""

from __future__ import annotations

from chatforge.env import env

from .mode import EMBEDDED, REDIS_URL

if EMBEDDED:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }

# "memory" keeps events in the server process (embedded mode only: the
# workers are threads of that process); "redis" is one Redis Stream per run.
CHATFORGE_EVENT_LOG: str = "memory" if EMBEDDED else "redis"
CHATFORGE_EVENT_LOG_REDIS_URL: str = env.str("CHATFORGE_EVENT_LOG_REDIS_URL", default=REDIS_URL)
# How long a run's events are kept: while it is active, and after it ends.
CHATFORGE_EVENTS_ACTIVE_TTL_S: int = env.int("CHATFORGE_EVENTS_ACTIVE_TTL_S", default=7 * 24 * 3600)
CHATFORGE_EVENTS_ENDED_TTL_S: int = env.int("CHATFORGE_EVENTS_ENDED_TTL_S", default=24 * 3600)
CHATFORGE_EVENTS_MAX_PER_RUN: int = env.int("CHATFORGE_EVENTS_MAX_PER_RUN", default=100_000)
