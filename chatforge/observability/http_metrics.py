"""Requests by route pattern and status, and their latency (to the
response's headers: a streamed response's body is not waited for)."""

from __future__ import annotations

import time

from django.http import HttpRequest, HttpResponseBase

from chatforge.serving.hybrid_middleware import HybridMiddleware

from . import metrics


def _route(request: HttpRequest) -> str:
    """The URL pattern that answered (bounded), never the path (unbounded)."""
    match = getattr(request, "resolver_match", None)
    return match.route if match is not None and match.route else "(unmatched)"


def _observe(request: HttpRequest, response: HttpResponseBase, started: float) -> None:
    route = _route(request)
    metrics.HTTP_REQUESTS.labels(method=request.method, route=route, status=str(response.status_code)).inc()
    metrics.HTTP_REQUEST_DURATION.labels(method=request.method, route=route).observe(time.perf_counter() - started)


class HttpMetricsMiddleware(HybridMiddleware):
    def __call__(self, request: HttpRequest):
        if self.is_async:
            return self.__acall__(request)
        started = time.perf_counter()
        response = self.get_response(request)
        _observe(request, response, started)
        return response

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        started = time.perf_counter()
        response = await self.get_response(request)
        _observe(request, response, started)
        return response
