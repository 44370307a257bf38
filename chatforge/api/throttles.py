"""Per-user limits on posting messages (429 with Retry-After)."""

from __future__ import annotations

from django.conf import settings
from rest_framework.request import Request
from rest_framework.throttling import UserRateThrottle


class MessagePostThrottle(UserRateThrottle):
    """Counts only POSTs (reading a conversation is never throttled). The
    rate is read per request so operators and tests can change it; counts
    live in the default cache, which is Redis in distributed mode, so every
    web process shares them."""

    scope = "message_post"

    def get_rate(self) -> str | None:
        return settings.CHATFORGE_MESSAGE_RATE or None

    def allow_request(self, request: Request, view) -> bool:
        if request.method != "POST":
            return True
        self.rate = self.get_rate()
        if self.rate is None:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request, view)
