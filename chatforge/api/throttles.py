"""Per-user limits on posting messages (429 with Retry-After)."""

from __future__ import annotations

from django.conf import settings
from django.core.cache import caches
from rest_framework.request import Request
from rest_framework.throttling import UserRateThrottle

from chatforge.db.redis_cache import ReusingRedisCache

from .rate_window import RateWindow


class MessagePostThrottle(UserRateThrottle):
    """Counts only POSTs (reading a conversation is never throttled). The
    rate is read per request so operators and tests can change it.

    With Redis as the cache (distributed mode) the count is one atomic
    script shared by every web process (``rate_window.py``): DRF's own
    read-then-write of a pickled list let two simultaneous requests of a
    user both take the last slot, in two round trips. Without Redis
    (embedded mode, one process) DRF's own count in the local cache."""

    scope = "message_post"
    _retry_after_s: float | None = None
    _counted_in_redis = False

    def get_rate(self) -> str | None:
        return settings.CHATFORGE_MESSAGE_RATE or None

    def allow_request(self, request: Request, view) -> bool:
        if request.method != "POST":
            return True
        self.rate = self.get_rate()
        if self.rate is None:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
        cache = caches["default"]  # DRF counts in the default cache too
        if not isinstance(cache, ReusingRedisCache):
            return super().allow_request(request, view)
        key = self.get_cache_key(request, view)
        if key is None:
            return True
        # A key of its own: DRF's list under the plain key is another Redis
        # type, left to expire where a deployment still has one.
        check = RateWindow(cache.redis_client()).check(
            cache.make_key(f"{key}:window"), limit=self.num_requests, window_s=self.duration, now=self.timer())
        self._counted_in_redis, self._retry_after_s = True, check.retry_after_s
        return check.allowed

    def wait(self) -> float | None:
        if self._counted_in_redis:
            return self._retry_after_s
        return super().wait()
