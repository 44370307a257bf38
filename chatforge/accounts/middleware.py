"""Refuse sign-in attempts from a client that has failed too often.

Both sign-in forms (the web login page and the admin's) post a password to
Django's ``authenticate()``; a failure there sends ``user_login_failed``,
which ``chatforge.accounts.apps`` counts per client
(``chatforge.accounts.auth_failures``). This middleware checks the count
before either form sees the POST, so a throttled client's guesses are never
checked at all, right or wrong.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import cache

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.conf import settings
from django.urls import NoReverseMatch, get_urlconf, reverse

from .auth_failures import TooManyFailures, check_auth_allowed, client_of_request


def _sign_in_paths() -> frozenset[str]:
    """The sign-in forms' paths in the URLconf serving this request."""
    return _sign_in_paths_of(get_urlconf() or settings.ROOT_URLCONF)


@cache
def _sign_in_paths_of(urlconf: object) -> frozenset[str]:
    paths = set()
    for name in ("login", "admin:login"):
        try:
            paths.add(reverse(name, urlconf=urlconf))
        except NoReverseMatch:  # a URLconf without that form (tests mount parts)
            pass
    return frozenset(paths)


def refusal(request: HttpRequest) -> HttpResponse | None:
    """The 429 page for a throttled sign-in POST; None to let it through."""
    if request.method != "POST" or request.path not in _sign_in_paths():
        return None
    try:
        check_auth_allowed(client=client_of_request(request))
    except TooManyFailures as exc:
        body = render_to_string("accounts/too_many_attempts.html", {"message": str(exc)}, request=request)
        return HttpResponse(body, status=429, headers={"Retry-After": str(exc.retry_after_s)})
    return None


class SignInThrottleMiddleware:
    """Sync and async: it adds no thread hop to async requests."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable) -> None:
        self.get_response = get_response
        self._async = iscoroutinefunction(get_response)
        if self._async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        if self._async:
            return self._acall(request)
        return refusal(request) or self.get_response(request)

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST" and request.path in _sign_in_paths():
            # The cache may be Redis: read it off the event loop.
            refused = await sync_to_async(refusal)(request)
            if refused is not None:
                return refused
        return await self.get_response(request)
