"""Turn anthropic SDK (and transport) exceptions into ``ProviderError``s a person can act on.

Kinds and retryability follow docs/providers.md, "Errors and retries".
Anthropic names the cause in the body's ``error.type`` (and, for spend
limits, ``error.details.error_code``); the HTTP status decides first and the
type refines it. An ``event: error`` arriving after HTTP 200 reaches us as an
``APIStatusError`` with status 200: it is classified by its type alone
(``overloaded_error`` = 529), which status-based retry logic would miss.

Errors raised while the body is being read are the transport's own
(``httpx2.ReadTimeout`` when no byte came for the idle timeout,
``RemoteProtocolError`` when the connection was cut), because the SDK does not
wrap them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import anthropic
import httpx2

from chatforge.llm.providers.base import ErrorKind, ProviderError
from chatforge.llm.providers.error_text import with_hint
from chatforge.llm.providers.retry_hints import retry_after_from_headers

KEY_HINT = "Check ANTHROPIC_API_KEY or your anthropic_api_key secret."
# ``error.details.error_code`` values of a 429 that waiting will not fix.
SPEND_LIMIT_CODES = frozenset({"enforced_spend_limit_reached", "contract_spend_limit_reached"})


@dataclass(frozen=True)
class _TypeRule:
    kind: ErrorKind
    retryable: bool
    status: int  # the HTTP status Anthropic uses for this error type


# docs.claude.com/en/api/errors
_BY_TYPE: dict[str, _TypeRule] = {
    "invalid_request_error": _TypeRule(ErrorKind.BAD_REQUEST, False, 400),
    "authentication_error": _TypeRule(ErrorKind.AUTHENTICATION, False, 401),
    "billing_error": _TypeRule(ErrorKind.QUOTA, False, 402),
    "permission_error": _TypeRule(ErrorKind.PERMISSION, False, 403),
    "not_found_error": _TypeRule(ErrorKind.NOT_FOUND, False, 404),
    "request_too_large": _TypeRule(ErrorKind.BAD_REQUEST, False, 413),
    "rate_limit_error": _TypeRule(ErrorKind.RATE_LIMIT, True, 429),
    "api_error": _TypeRule(ErrorKind.SERVER, True, 500),
    "timeout_error": _TypeRule(ErrorKind.SERVER, True, 504),
    "overloaded_error": _TypeRule(ErrorKind.OVERLOADED, True, 529),
}


@dataclass(frozen=True)
class _ErrorBody:
    """The useful part of ``{"type": "error", "error": {"type", "message", "details"}}``."""

    type: str
    message: str
    error_code: str

    @classmethod
    def of(cls, exc: anthropic.APIStatusError) -> _ErrorBody:
        body = exc.body
        inner = body.get("error") if isinstance(body, Mapping) else None
        if not isinstance(inner, Mapping):
            text = str(body or exc.message or "").strip()
            return cls(type="", message=text, error_code="")
        details = inner.get("details")
        code = details.get("error_code") if isinstance(details, Mapping) else None
        return cls(
            type=str(inner.get("type") or ""),
            message=str(inner.get("message") or exc.message or "").strip(),
            error_code=str(code or ""),
        )


def provider_error_from(
    exc: BaseException, *, where: str, model: str, idle_timeout_s: float
) -> ProviderError:
    """Map any exception raised while creating or reading a response."""
    if isinstance(exc, anthropic.APITimeoutError):
        if isinstance(exc.__cause__, httpx2.ReadTimeout):
            return _stalled(where, idle_timeout_s)
        return ProviderError(
            f"{where} did not answer in time: {exc.__cause__ or exc.message}",
            retryable=True,
            kind=ErrorKind.CONNECTION,
        )
    if isinstance(exc, anthropic.APIConnectionError):
        cause = exc.__cause__ or exc.message
        return ProviderError(f"Could not reach {where}: {cause}", retryable=True, kind=ErrorKind.CONNECTION)
    if isinstance(exc, anthropic.APIStatusError):
        if exc.status_code == 200:
            return _from_error_event(exc, where=where)
        return _from_status(exc, where=where, model=model)
    if isinstance(exc, anthropic.APIResponseValidationError):
        return ProviderError(
            f"{where} sent a response this adapter cannot read: {exc.message}",
            retryable=True,
            kind=ErrorKind.PROTOCOL,
        )
    if isinstance(exc, httpx2.ReadTimeout):
        return _stalled(where, idle_timeout_s)
    if isinstance(exc, httpx2.TimeoutException):
        return ProviderError(f"{where} timed out: {exc}", retryable=True, kind=ErrorKind.CONNECTION)
    if isinstance(exc, httpx2.TransportError):
        return ProviderError(
            f"The connection to {where} broke mid-stream: {exc}", retryable=True, kind=ErrorKind.CONNECTION
        )
    if isinstance(exc, ValueError):  # json.JSONDecodeError from an SSE ``data:`` line
        return ProviderError(
            f"{where} sent malformed data in the stream: {exc}", retryable=True, kind=ErrorKind.PROTOCOL
        )
    return ProviderError(f"{where} call failed: {exc}", retryable=False, kind=ErrorKind.OTHER)


def _stalled(where: str, idle_timeout_s: float) -> ProviderError:
    return ProviderError(
        f"{where} stopped sending data for {idle_timeout_s:g} s; giving up on this response",
        retryable=True,
        kind=ErrorKind.STALLED,
    )


def _from_status(exc: anthropic.APIStatusError, *, where: str, model: str) -> ProviderError:
    status = exc.status_code
    body = _ErrorBody.of(exc)
    detail = f"({status}{' ' + body.type if body.type else ''}): {body.message or 'no details given'}"
    request_id = f" [request-id {exc.request_id}]" if exc.request_id else ""
    retry_after_s = None
    if status == 401:
        kind, retryable = ErrorKind.AUTHENTICATION, False
        message = with_hint(f"{where} rejected the API key {detail}", KEY_HINT)
    elif status == 402 or (status == 429 and body.error_code in SPEND_LIMIT_CODES):
        kind, retryable = ErrorKind.QUOTA, False
        cause = body.error_code or body.type
        message = with_hint(
            f"{where} refused the request for billing reasons ({status} {cause}): {body.message}",
            "Check the account's credit balance and spend limits in the Anthropic Console.",
        )
    elif status == 403:
        kind, retryable = ErrorKind.PERMISSION, False
        message = with_hint(f"{where} refused access with this API key {detail}", KEY_HINT)
    elif status == 404:
        kind, retryable = ErrorKind.NOT_FOUND, False
        message = with_hint(f"{where} does not know model {model!r} or the endpoint {detail}",
                            "Check the model name.")
    elif status == 429:
        kind, retryable = ErrorKind.RATE_LIMIT, True
        message = f"{where} is rate limiting requests {detail}"
    elif status == 529 or body.type == "overloaded_error":
        kind, retryable = ErrorKind.OVERLOADED, True
        message = f"{where} is overloaded {detail}"
    elif status in (408, 409):
        kind, retryable = ErrorKind.SERVER, True
        message = f"{where} asked to retry the request {detail}"
    elif status >= 500:
        kind, retryable = ErrorKind.SERVER, True
        message = f"{where} had a server error {detail}"
    elif status in (400, 413, 422):
        kind, retryable = ErrorKind.BAD_REQUEST, False
        message = f"{where} rejected the request {detail}"
    else:
        kind, retryable = ErrorKind.OTHER, False
        message = f"{where} refused the request {detail}"
    if retryable:
        retry_after_s = retry_after_from_headers(exc.response.headers)
    return ProviderError(
        message + request_id, retryable=retryable, status_code=status, kind=kind, retry_after_s=retry_after_s
    )


def _from_error_event(exc: anthropic.APIStatusError, *, where: str) -> ProviderError:
    """``event: error`` after the stream began. An unknown type is assumed to
    be the server's trouble, as the request was accepted."""
    body = _ErrorBody.of(exc)
    rule = _BY_TYPE.get(body.type, _TypeRule(ErrorKind.SERVER, True, 500))
    return ProviderError(
        f"{where} failed mid-stream ({body.type or 'error'}): {body.message or 'no details given'}",
        retryable=rule.retryable,
        status_code=rule.status,
        kind=rule.kind,
    )
