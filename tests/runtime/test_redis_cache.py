"""The Redis cache backend keeps one redis-py client per connection pool."""

from __future__ import annotations

from django.conf import settings

from chatforge.db.redis_cache import ReusingRedisCache


def test_cache_operations_share_one_client_and_work():
    cache = ReusingRedisCache(settings.REDIS_URL, {"OPTIONS": {"max_connections": 10}})
    first = cache._cache.get_client(write=True)
    cache.set("chatforge-test-reuse", {"n": 1}, 30)
    assert cache.get("chatforge-test-reuse") == {"n": 1}
    assert cache.add("chatforge-test-reuse-count", 0, 30)
    assert cache.incr("chatforge-test-reuse-count") == 1
    assert cache._cache.get_client() is first  # one server: reads and writes share pool 0
    assert cache._cache.get_client(write=True).connection_pool is first.connection_pool
    cache.delete_many(["chatforge-test-reuse", "chatforge-test-reuse-count"])
    assert cache.get("chatforge-test-reuse") is None
