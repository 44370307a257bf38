"""Error pages: a browser asking for a web page gets HTML; everything else
(the APIs, scripts) keeps the JSON error body every API error uses."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.views import csrf, defaults

from chatforge.api import errors as api_errors

_API_PREFIXES = ("/api/", "/v1/", "/healthz", "/readyz")


def _wants_html(request: HttpRequest) -> bool:
    return not request.path.startswith(_API_PREFIXES) and "text/html" in request.headers.get("Accept", "")


def not_found_view(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _wants_html(request):
        body = render_to_string("web/error.html", {
            "title": "Not found",
            "message": f"There is nothing at {request.path}, or it is not yours to see.",
        }, request=request)
        return HttpResponse(body, status=404)
    return api_errors.not_found_view(request, exception)


def bad_request_view(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _wants_html(request):
        return defaults.bad_request(request, exception)
    return api_errors.bad_request_view(request, exception)


def csrf_failure_view(request: HttpRequest, reason: str = "") -> HttpResponse:
    """Django's CSRF page for the web pages; the JSON error on API paths."""
    if _wants_html(request):
        return csrf.csrf_failure(request, reason)
    return api_errors.csrf_failure_view(request, reason)


def server_error_view(request: HttpRequest) -> HttpResponse:
    if _wants_html(request):
        # No request context: a failing context processor must not fail this page too.
        body = render_to_string("web/error.html", {
            "title": "Something went wrong",
            "message": "The server failed to show this page. It has been logged; try again, "
                       "and contact the operator if it persists.",
        })
        return HttpResponse(body, status=500)
    return api_errors.server_error_view(request)
