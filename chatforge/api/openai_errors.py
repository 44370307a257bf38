"""Errors in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``.

OpenAI clients read this shape (the SDK raises ``BadRequestError``,
``AuthenticationError``… from the status and puts ``error`` in ``body``), so
the OpenAI-compatible endpoints answer with it instead of ChatForge's own
``{"error": {"code", "message", "details"}}``. It lives with the REST API's
errors because every HTTP answer that depends on the path (a 503 during an
outage, a 404, a 400 for a NUL) is decided in ``errors.py`` for /v1 too.
"""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse

from chatforge.errors import ChatForgeError, ErrorCode

# OpenAI's error types by status; any other 4xx is the client's request
# (a 403 failed CSRF check, a 422 reused Idempotency-Key were "server_error").
# 401 is an ``invalid_request_error`` at OpenAI too (code ``invalid_api_key``).
_TYPES = {
    429: "rate_limit_exceeded",
    504: "timeout",
}


def _type_for(status: int) -> str:
    return _TYPES.get(status) or ("invalid_request_error" if 400 <= status < 500 else "server_error")


class OpenAIError(Exception):
    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        code: str | None = None,
        param: str | None = None,
        type_: str | None = None,
        retry: bool | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.param = param
        self.type = type_ or _type_for(status)
        # The OpenAI SDK honours ``x-should-retry``; a retried chat would start
        # a second run, so failures of a run that did start say "do not retry".
        self.retry = retry
        self.headers = headers or {}

    def body(self, **extra: Any) -> dict[str, Any]:
        return {
            "error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code},
            **extra,
        }

    def response(self, **extra: Any) -> JsonResponse:
        response = JsonResponse(self.body(**extra), status=self.status)
        for name, value in self.headers.items():
            response[name] = value
        if self.retry is not None:
            response["x-should-retry"] = "true" if self.retry else "false"
        return response


# Which request field a ChatForge error is about, in this API's terms.
_PARAMS = {ErrorCode.UNKNOWN_TOOL: "tools"}
_FIELDS = {"content": "messages"}


def from_chatforge(exc: ChatForgeError) -> OpenAIError:
    field = exc.details.get("field")
    param = _PARAMS.get(exc.code) or (_FIELDS.get(field, field) if isinstance(field, str) else None)
    return OpenAIError(exc.message, status=exc.status_code, code=str(exc.code), param=param,
                       headers=exc.headers or None)
