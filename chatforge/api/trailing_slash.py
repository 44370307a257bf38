"""Both spellings of every API route: ``/api/tools/test`` and ``/api/tools/test/``,
``/v1/models`` and ``/v1/models/``.

The ``/api`` routes are declared with a trailing slash, and Django's
``APPEND_SLASH`` answers the other spelling with a redirect - which loses a
POST's body (and in debug raises). Clients copy paths from docs and contracts
that write them either way, so for ``/api/`` paths that do not resolve as
sent but do with a slash, the slash is added to the request itself, before
any other middleware looks at the path. No redirect, the same view, the same
answer. ``/v1`` routes are declared without one, as OpenAI's are; a client
whose base URL ends in ``/`` may send one, and it is taken off the same way.

Resolving is pure computation, so the middleware runs inline in both the
sync and the async handler (no thread hop per request).
"""

from __future__ import annotations

from collections.abc import Awaitable

from django.http import HttpRequest, HttpResponseBase
from django.urls import get_urlconf
from django.urls.base import is_valid_path

from chatforge.serving.hybrid_middleware import HybridMiddleware

API_PREFIX = "/api/"
OPENAI_PREFIX = "/v1/"


def match_declared_slash(request: HttpRequest) -> None:
    """Append the slash to an /api/ path that resolves only with it; take it
    off a /v1/ path that resolves only without it."""
    path = request.path_info
    if path.endswith("/"):
        if not path.startswith(OPENAI_PREFIX) or len(path) == len(OPENAI_PREFIX):
            return
        other = path[:-1]
    elif path.startswith(API_PREFIX) or path == API_PREFIX[:-1]:
        other = path + "/"
    else:
        return
    urlconf = getattr(request, "urlconf", None) or get_urlconf()
    if is_valid_path(path, urlconf) or not is_valid_path(other, urlconf):
        return
    request.path = request.path[: len(request.path) - len(path)] + other
    request.path_info = other


class ApiTrailingSlashMiddleware(HybridMiddleware):
    def __call__(self, request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        match_declared_slash(request)
        return self.get_response(request)
