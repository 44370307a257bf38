"""The message throttle's sliding window in Redis (chatforge/api/rate_window.py)
and the throttle on it: the count, the window sliding, Retry-After, and
simultaneous requests of one user never passing more than the limit."""

from __future__ import annotations

import threading
import uuid
from types import SimpleNamespace

import pytest
import redis
from django.conf import settings

from chatforge.api.rate_window import RateWindow
from chatforge.api.throttles import MessagePostThrottle


@pytest.fixture
def client():
    client = redis.Redis.from_url(settings.REDIS_URL)
    key = f"test-rate-window:{uuid.uuid4()}"
    yield client, key
    client.delete(key)


def test_the_limit_holds_then_the_window_slides(client):
    redis_client, key = client
    window = RateWindow(redis_client)
    for i in range(3):
        check = window.check(key, limit=3, window_s=60, now=1000.0 + i)
        assert (check.allowed, check.count, check.retry_after_s) == (True, i + 1, None)
    refused = window.check(key, limit=3, window_s=60, now=1010.0)
    # The first request (at 1000) leaves the window at 1060: 50 s from now.
    assert (refused.allowed, refused.count, refused.retry_after_s) == (False, 3, 50.0)
    assert redis_client.zcard(key) == 3  # a refused request is not counted
    assert window.check(key, limit=3, window_s=60, now=1060.5).allowed  # the first one has left
    refused = window.check(key, limit=3, window_s=60, now=1060.9)  # 1001, 1002 and 1060.5 are in
    assert not refused.allowed and refused.retry_after_s == pytest.approx(0.1)


def test_requests_in_the_same_instant_count_apart_and_the_key_expires(client):
    redis_client, key = client
    window = RateWindow(redis_client)
    assert window.check(key, limit=5, window_s=30, now=2000.0).allowed
    assert window.check(key, limit=5, window_s=30, now=2000.0).allowed
    assert redis_client.zcard(key) == 2
    assert 0 < redis_client.pttl(key) <= 30_000


def test_simultaneous_requests_of_one_user_take_exactly_the_limit(settings, make_user):
    """DRF's read-then-write count let two requests that read the same list
    both pass; the script is atomic."""
    from django.core.cache import cache

    cache.clear()  # a user id of an earlier run may have counts left
    settings.CHATFORGE_MESSAGE_RATE = "5/min"
    user, _ = make_user()
    request = SimpleNamespace(method="POST", user=user, META={"REMOTE_ADDR": "127.0.0.1"})
    start = threading.Barrier(20)
    allowed: list[bool] = []

    def post() -> None:
        throttle = MessagePostThrottle()
        start.wait()
        allowed.append(throttle.allow_request(request, None))

    threads = [threading.Thread(target=post) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(allowed) == [False] * 15 + [True] * 5
    throttle = MessagePostThrottle()
    assert not throttle.allow_request(request, None)
    assert 0 < throttle.wait() <= 60
