"""Every API error is JSON: ``{"error": {"code", "message", "details"}}``.

One handler maps our ``ChatForgeError`` and DRF's exceptions to that shape,
so clients parse one format and people read one kind of message.

A request that fails because Postgres, Redis or the broker cannot be reached
(``chatforge.errors.outages.is_outage``) is answered 503
``service_unavailable`` with ``Retry-After``, wherever it failed: in a DRF
view (``exception_handler``), in any other view (the middleware in
``chatforge/api/unavailable.py``), or in a middleware (``server_error_view``,
Django's 500 handler, which still has the exception at hand). The
OpenAI-compatible endpoints (``/v1/``) answer in OpenAI's error shape.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from django.conf import settings
from django.core.exceptions import DisallowedHost, RequestDataTooBig
from django.http import Http404, HttpRequest, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from chatforge.errors import ChatForgeError
from chatforge.errors.outages import is_outage

from .nul_guard import NulInURL
from .openai_errors import OpenAIError

logger = logging.getLogger(__name__)

# Seconds a client is asked to wait after a 503 (HTTP and websocket handshakes).
RETRY_AFTER_S = 5
UNAVAILABLE_MESSAGE = (
    f"The service is temporarily unavailable: the database or Redis cannot be reached. "
    f"Try again in {RETRY_AFTER_S} s."
)
OPENAI_PREFIX = "/v1/"


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details or {}}}


def _unavailable(path: str, exc: BaseException) -> tuple[dict[str, Any], dict[str, str]]:
    logger.warning("%s answered 503: a service is unreachable: %s: %s", path, type(exc).__name__, exc)
    return (error_body("service_unavailable", UNAVAILABLE_MESSAGE, {"retry_after_s": RETRY_AFTER_S}),
            {"Retry-After": str(RETRY_AFTER_S)})


def unavailable_response(request: HttpRequest, exc: BaseException) -> JsonResponse | None:
    """The 503 for a request that failed on an outage; None for any other failure."""
    if not is_outage(exc):
        return None
    body, headers = _unavailable(request.path, exc)
    if request.path.startswith(OPENAI_PREFIX):
        return OpenAIError(UNAVAILABLE_MESSAGE, status=503, type_="server_error", code="service_unavailable",
                           headers=headers).response()
    return JsonResponse(body, status=status.HTTP_503_SERVICE_UNAVAILABLE, headers=headers)


def _validation_message(detail: Any) -> str:
    """A readable sentence from DRF's nested validation errors."""
    if isinstance(detail, dict):
        parts = []
        for field, errors in detail.items():
            text = _validation_message(errors)
            parts.append(text if field == "non_field_errors" else f"{field}: {text}")
        return "; ".join(parts)
    if isinstance(detail, list):
        return " ".join(_validation_message(item) for item in detail)
    return str(detail)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if is_outage(exc):
        set_rollback()
        request = context.get("request")
        body, headers = _unavailable(request.path if request is not None else "?", exc)
        return Response(body, status=status.HTTP_503_SERVICE_UNAVAILABLE, headers=headers)
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response(
            error_body("request_too_large", f"The request body is larger than {limit} bytes; send less.",
                       {"limit_bytes": limit}),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, exceptions.Throttled):
        response = drf_exception_handler(exc, context)
        wait = int(exc.wait) if exc.wait is not None else None
        # Throttles that know their reason say it (authentication failures);
        # DRF's own throttles here only ever limit posting messages.
        message = getattr(exc, "message", None) or (
            "Too many messages; wait " + (f"{wait} s" if wait is not None else "a moment") + " and send again."
        )
        response.data = error_body("throttled", message, {"retry_after_s": wait})
        return response
    if isinstance(exc, ChatForgeError):
        return Response(error_body(exc.code, exc.message, exc.details), status=exc.status_code,
                        headers=exc.headers or None)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # unexpected: Django's 500 handler answers (JSON too)
    if isinstance(exc, exceptions.ValidationError):
        response.data = error_body(
            "invalid_request", _validation_message(exc.detail), {"fields": exc.detail}
        )
    elif isinstance(exc, exceptions.NotFound):
        detail = str(exc.detail)
        if detail == str(exceptions.NotFound.default_detail):
            detail = "Not found: it does not exist or you do not have access to it."
        response.data = error_body("not_found", detail)
    elif isinstance(exc, exceptions.APIException):
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else "error"
        response.data = error_body(code, _validation_message(exc.detail))
    return response


def _api_error(request: HttpRequest, status_code: int, code: str, message: str,
               headers: dict[str, str] | None = None) -> JsonResponse:
    """The error in the shape the path's clients parse: OpenAI's on /v1/,
    ours everywhere else."""
    if request.path.startswith(OPENAI_PREFIX):
        return OpenAIError(message, status=status_code, code=code, headers=headers).response()
    return JsonResponse(error_body(code, message), status=status_code, headers=headers)


def method_not_allowed(request: HttpRequest, allowed: list[str]) -> JsonResponse:
    """405 with ``Allow``, for the plain (non-DRF) JSON views."""
    names = ", ".join(allowed)
    return _api_error(request, status.HTTP_405_METHOD_NOT_ALLOWED, "method_not_allowed",
                      f"{request.method} is not allowed here; use {names}.", headers={"Allow": names})


def bad_request_view(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    """Django's 400: most often a Host header this server does not answer to
    (``DisallowedHost``), a URL holding a NUL character
    (``chatforge.api.nul_guard``) or a malformed request it could not read."""
    if isinstance(exception, NulInURL):  # says where: the path, or which query parameter
        return _api_error(request, status.HTTP_400_BAD_REQUEST, "invalid_request", str(exception))
    if isinstance(exception, DisallowedHost):
        message = ("This server does not answer to the host name in the request's Host header; "
                   "use the address the operator published.")
        return _api_error(request, status.HTTP_400_BAD_REQUEST, "bad_host", message)
    return _api_error(request, status.HTTP_400_BAD_REQUEST, "bad_request",
                      "The request could not be read; check its headers and body.")


def csrf_failure_view(request: HttpRequest, reason: str = "") -> JsonResponse:
    """403 for a cookie-authenticated unsafe request without a valid CSRF token."""
    return _api_error(request, status.HTTP_403_FORBIDDEN, "csrf_failed",
                      f"CSRF check failed ({reason}). API clients should authenticate with "
                      "'Authorization: Bearer <token>'; pages must send the CSRF token.")


def not_found_view(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return _api_error(request, status.HTTP_404_NOT_FOUND, "not_found",
                      f"No such endpoint or object: {request.path}")


def server_error_view(request: HttpRequest) -> JsonResponse:
    # Django calls its 500 handler while handling the exception: one raised
    # outside any view (a middleware reading the session) is still at hand.
    unavailable = unavailable_response(request, sys.exc_info()[1] or Exception())
    if unavailable is not None:
        return unavailable
    return JsonResponse(
        error_body(
            "server_error",
            "The server failed to handle this request. It has been logged; try again, "
            "and contact the operator if it persists.",
        ),
        status=status.HTTP_500_INTERNAL_SERVER_ERROR,
    )
