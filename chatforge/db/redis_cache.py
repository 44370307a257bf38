"""Django's Redis cache backend, keeping its redis-py client.

Django's ``RedisCacheClient.get_client`` builds a new ``redis.Redis`` on
its connection pool for every cache operation; with redis-py 8 that
constructor is a measurable part of an API request (the message throttle
makes two cache calls per POST). A ``redis.Redis`` is safe to share between
threads (each command borrows a connection from the pool), so one per pool
is kept and reused; everything else is Django's backend unchanged.
"""

from __future__ import annotations

import redis
from django.core.cache.backends.redis import RedisCache, RedisCacheClient


class ReusingRedisCacheClient(RedisCacheClient):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, object] = {}  # by id() of the pool it uses (pools live as long as this)

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client


class ReusingRedisCache(RedisCache):
    """``CACHES`` backend: ``chatforge.db.redis_cache.ReusingRedisCache``."""

    def __init__(self, server, params) -> None:
        super().__init__(server, params)
        self._class = ReusingRedisCacheClient

    def redis_client(self) -> redis.Redis:
        """The redis-py client this cache writes with, for work the cache
        API cannot do in one round trip (the message throttle's script)."""
        return self._cache.get_client(write=True)
