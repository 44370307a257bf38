"""Both spellings of every API route: ``/api/tools/test`` and ``/api/tools/test/``.

The routes are declared with a trailing slash, and Django's ``APPEND_SLASH``
answers the other spelling with a redirect - which loses a POST's body (and
in debug raises). Clients copy paths from docs and contracts that write them
either way, so for ``/api/`` paths that do not resolve as sent but do with a
slash, the slash is added to the request itself, before any other middleware
looks at the path. No redirect, the same view, the same answer.

Resolving is pure computation, so the middleware runs inline in both the
sync and the async handler (no thread hop per request).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponseBase
from django.urls import get_urlconf
from django.urls.base import is_valid_path

API_PREFIX = "/api/"


def add_missing_slash(request: HttpRequest) -> None:
    """Append the slash to an /api/ path that resolves only with it."""
    path = request.path_info
    if path.endswith("/") or not (path.startswith(API_PREFIX) or path == API_PREFIX[:-1]):
        return
    urlconf = getattr(request, "urlconf", None) or get_urlconf()
    if is_valid_path(path, urlconf) or not is_valid_path(path + "/", urlconf):
        return
    request.path_info = path + "/"
    request.path = request.path + "/"


class ApiTrailingSlashMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        add_missing_slash(request)
        return self.get_response(request)
