"""503 instead of 500 when a view fails because a service is unreachable.

DRF views answer outages through the API's exception handler; this
middleware does the same for every other view — the OpenAI-compatible
``/v1/`` endpoints and the SSE event stream are plain (async) Django views,
and their first act, authenticating the token, reads the database. A view
that raises an outage error (``chatforge.errors.outages``: Postgres,
Redis or the broker unreachable, no pooled connection free in time) gets
HTTP 503 with ``Retry-After`` and the JSON error body of its API; any other
exception goes on to Django's 500 handler untouched. Failures raised by
another middleware never reach a view's exception hook: Django's 500 handler
(``chatforge.api.errors.server_error_view``) maps those the same way.

``process_exception`` is called for sync and async views alike (Django runs
it in a thread for async ones), so the middleware works under both.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.utils.deprecation import MiddlewareMixin

from chatforge.api.errors import unavailable_response


class ServiceUnavailableMiddleware(MiddlewareMixin):
    sync_capable = True
    async_capable = True

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return unavailable_response(request, exception)
