"""Channels and the per-run event log."""

from __future__ import annotations

from chatforge.settings.env import env

from .mode import EMBEDDED, REDIS_URL

# The run and conversation sockets do not use the channel layer (events come
# from the per-run event log); it stays configured for anything that does.
# A channel-layer receive is a BZPOPMIN that Redis holds for up to
# RedisChannelLayer.brpop_timeout (5 s), so the connection's socket timeout
# must be longer than that: redis-py's default of 5 s raced it and cut
# websockets off about every 5 s. Each host dict goes to redis-py's
# ConnectionPool.from_url (query parameters in REDIS_URL still win).
CHANNEL_LAYER_BLOCK_S = 5  # channels_redis's RedisChannelLayer.brpop_timeout
CHANNEL_LAYER_SOCKET_TIMEOUT_S = CHANNEL_LAYER_BLOCK_S + 10

if EMBEDDED:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "socket_timeout": CHANNEL_LAYER_SOCKET_TIMEOUT_S,
                        "socket_connect_timeout": 5,
                        "socket_keepalive": True,
                        # Ping a connection idle this long before reusing it, so one
                        # a NAT or Redis dropped is replaced instead of failing a call.
                        "health_check_interval": 30,
                    }
                ]
            },
        }
    }

# Web origins (scheme://host[:port], comma-separated) whose pages may open a
# websocket signed in with the session cookie; empty: the origin the socket
# is served on. Token sockets need no Origin (chatforge/realtime/origins.py).
CHATFORGE_ALLOWED_ORIGINS: list[str] = env.list("CHATFORGE_ALLOWED_ORIGINS", default=[])

# "memory" keeps events in the server process (embedded mode only: the
# workers are threads of that process); "redis" is one Redis Stream per run.
CHATFORGE_EVENT_LOG: str = "memory" if EMBEDDED else "redis"
CHATFORGE_EVENT_LOG_REDIS_URL: str = env.str("CHATFORGE_EVENT_LOG_REDIS_URL", default=REDIS_URL)
# A process's waiting run sockets share one connection (one XREAD for all,
# orchestration/event_log/stream_follower.py); reads that do not wait and
# appends take one each while they run. redis-py's asyncio pool stops at
# 100 connections by default ("Too many connections"), which once stalled
# every socket past the 100th. Connections are made on demand; this is a
# ceiling, not a reservation (a max_connections query parameter in the URL
# still wins).
CHATFORGE_EVENT_LOG_MAX_CONNECTIONS: int = env.int("CHATFORGE_EVENT_LOG_MAX_CONNECTIONS", default=10_000)
# How long a run's events are kept: while it is active, and after it ends.
CHATFORGE_EVENTS_ACTIVE_TTL_S: int = env.int("CHATFORGE_EVENTS_ACTIVE_TTL_S", default=7 * 24 * 3600)
CHATFORGE_EVENTS_ENDED_TTL_S: int = env.int("CHATFORGE_EVENTS_ENDED_TTL_S", default=24 * 3600)
CHATFORGE_EVENTS_MAX_PER_RUN: int = env.int("CHATFORGE_EVENTS_MAX_PER_RUN", default=100_000)
