"""HTTP requests: a NUL in the URL's path or query is a 400, a cookie
holding one is dropped, before the session, authentication and every view
(the rule and why it is a middleware: ``chatforge/api/nul_guard.py``)."""

from __future__ import annotations

from collections.abc import Awaitable

from django.http import HttpRequest, HttpResponseBase

from chatforge.api.nul_guard import NulInURL, holds_nul, url_problem, without_nul_cookies
from chatforge.serving.hybrid_middleware import HybridMiddleware

from .errors import bad_request_view


class RefuseNulInURL(HybridMiddleware):
    """HTTP: a NUL in the path or the query is a 400; a cookie holding one
    is dropped. Runs before the session, authentication and every view."""

    def __call__(self, request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        problem = url_problem(request.path_info, request.META.get("QUERY_STRING", ""))
        if problem is None:
            if holds_nul(request.META.get("HTTP_COOKIE", "")):
                request.COOKIES = without_nul_cookies(request.COOKIES)
            return self.get_response(request)

        response = bad_request_view(request, NulInURL(problem))
        return _ready(response) if self.is_async else response


async def _ready(response: HttpResponseBase) -> HttpResponseBase:
    return response
