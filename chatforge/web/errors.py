"""Error pages. API paths (``/api/``, ``/v1/``, the probes) always answer
the JSON error every API error uses. Elsewhere, a 404 or 500 is HTML for a
browser asking for a page (scripts keep JSON); a 400 or a failed CSRF check
is Django's page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.views import csrf, defaults

from chatforge.api import errors as api_errors

_API_PREFIXES = ("/api/", "/v1/", "/healthz", "/readyz")


def _is_api_path(request: HttpRequest) -> bool:
    return request.path.startswith(_API_PREFIXES) or request.path in ("/api", "/v1")


def _wants_html(request: HttpRequest) -> bool:
    return not _is_api_path(request) and "text/html" in request.headers.get("Accept", "")


def not_found_page(request: HttpRequest) -> HttpResponse:
    """The app's own "not found" page (404), with a link back to the chat.

    Page views return it themselves for what a person follows a link to (a
    deleted or someone else's conversation) instead of raising ``Http404``:
    with ``DEBUG`` on (embedded mode's default) Django answers a raised 404
    with its technical page, which lists the URL patterns to whoever asks."""
    body = render_to_string("web/error.html", {
        "title": "Not found",
        "message": f"There is nothing at {request.path}, or it is not yours to see.",
    }, request=request)
    return HttpResponse(body, status=404)


def not_found_view(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _wants_html(request):
        return not_found_page(request)
    return api_errors.not_found_view(request, exception)


# A 400 (a foreign Host header, ``DisallowedHost``) and a failed CSRF check
# go by the path alone: API clients parse JSON whatever they send as Accept,
# and a form posted to a page gets Django's page, whichever client posted it.
def bad_request_view(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api_path(request):
        return api_errors.bad_request_view(request, exception)
    return defaults.bad_request(request, exception)


def csrf_failure_view(request: HttpRequest, reason: str = "") -> HttpResponse:
    """Django's CSRF page for the web pages; the JSON error on API paths."""
    if _is_api_path(request):
        return api_errors.csrf_failure_view(request, reason)
    return csrf.csrf_failure(request, reason)


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
