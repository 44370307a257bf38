"""Throttling of failed authentication: passwords and API tokens.

Guessing a password or a token costs an attacker one request per guess, so
failures are counted per client address in a fixed window. Once a client
has failed ``CHATFORGE_AUTH_FAILURE_LIMIT`` times within
``CHATFORGE_AUTH_FAILURE_WINDOW_S`` seconds, the login form refuses every
further attempt from it until the window ends, before the password is
checked, with 429 and ``Retry-After``; a further bad API token is answered
429 ``throttled`` with ``Retry-After`` instead of 401.

Tokens are checked first and counted only when they fail: a token is 256
random bits, so guessing one is hopeless and the throttle's job is to stop
floods and make them visible, and a request with a valid token pays no extra
round trip to the cache. Passwords are people's choices, so there the check
comes first and a correct password is refused too while the client is
throttled.

Why per client and not per account: counting per user name would let anyone
lock a person out of their own account by failing on purpose, and answering
differently for known and unknown names would tell an attacker which
accounts exist. The refusal is the same whatever name or token was tried,
and a successful attempt does not clear the count (else one valid token
would reset an attacker's budget for guessing others).

Counts live in Django's default cache, which is Redis in distributed mode,
so every web process shares them; in embedded mode it is the process's
memory. The client address is ``REMOTE_ADDR`` (HTTP) or the ASGI ``client``
(websockets): behind a proxy, run uvicorn with ``--proxy-headers`` and
``--forwarded-allow-ips`` so that it is the real client's.
"""

from __future__ import annotations

import hashlib
import math
import time

from django.conf import settings
from django.core.cache import cache

KEY_PREFIX = "chatforge:auth-failures"


class TooManyFailures(Exception):
    """Raised instead of checking a credential while the client is throttled."""

    def __init__(self, retry_after_s: int) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(
            f"Too many failed sign-in or token attempts from this address; "
            f"wait {retry_after_s} s and try again."
        )


def _window() -> tuple[int, int]:
    """The current window's number and the seconds left in it."""
    length = max(1, int(settings.CHATFORGE_AUTH_FAILURE_WINDOW_S))
    now = time.time()
    number = int(now // length)
    return number, max(1, math.ceil((number + 1) * length - now))


def _key(client: str, window: int) -> str:
    # Hashed so that an address (or anything a proxy put there) never forms
    # an odd cache key, and addresses are not readable in Redis.
    digest = hashlib.sha256(client.encode("utf-8", "replace")).hexdigest()[:32]
    return f"{KEY_PREFIX}:{window}:{digest}"


def _enabled() -> bool:
    return int(settings.CHATFORGE_AUTH_FAILURE_LIMIT) > 0


def check_auth_allowed(*, client: str | None) -> None:
    """Raise ``TooManyFailures`` if ``client`` has used up its failures."""
    if not _enabled() or not client:
        return
    window, left = _window()
    failures = cache.get(_key(client, window), 0)
    if failures >= int(settings.CHATFORGE_AUTH_FAILURE_LIMIT):
        raise TooManyFailures(retry_after_s=left)


def record_auth_failure(*, client: str | None) -> None:
    """Count one failed password or token from ``client`` in this window, and
    raise ``TooManyFailures`` once the count is over the limit."""
    if not _enabled() or not client:
        return
    window, left = _window()
    key = _key(client, window)
    # add() then incr(): incr alone fails on a missing key; the count expires
    # with its window (plus a second so it cannot vanish just before the end).
    failures = 1
    if not cache.add(key, 1, timeout=left + 1):
        try:
            failures = cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.add(key, 1, timeout=left + 1)
    if failures > int(settings.CHATFORGE_AUTH_FAILURE_LIMIT):
        raise TooManyFailures(retry_after_s=left)


def client_of_request(request) -> str | None:
    """The client address of a Django request (see the module docstring)."""
    return request.META.get("REMOTE_ADDR") or None


def client_of_scope(scope: dict) -> str | None:
    """The client address of an ASGI scope (websockets)."""
    client = scope.get("client")
    return str(client[0]) if client else None


def count_failed_sign_in(sender, credentials=None, request=None, **kwargs) -> None:
    """``user_login_failed`` receiver: a wrong password counts as a failure.

    The refusal itself comes from ``SignInThrottleMiddleware`` on the next
    attempt; this one is answered by the form as any wrong password is.
    """
    if request is None:
        return
    try:
        record_auth_failure(client=client_of_request(request))
    except TooManyFailures:
        pass
