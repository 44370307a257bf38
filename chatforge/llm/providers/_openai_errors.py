"""Turn openai SDK exceptions and in-stream error events into
``ProviderError``s a person can act on. Shared by the Chat Completions and
the Responses adapters.

Kinds and retryability follow docs/providers.md, "Errors and retries":
connection trouble, timeouts, 408, 409, 429 rate limits and 5xx may succeed
later; 400/401/403/404/422 and a 429 ``insufficient_quota`` (billing) never
will. The message
says whose problem it is (the operator's key or model name, the account's
billing, the server, the network), because it ends up in front of someone who
has to fix it. ``retry_after_s`` carries the server's ``retry-after-ms`` /
``retry-after`` advice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import httpx
import httpx2
import openai

from chatforge.llm.providers.base import RETRYABLE_KINDS, ErrorKind, ProviderError
from chatforge.llm.providers.error_text import with_hint
from chatforge.llm.providers.retry_hints import retry_after_from_headers

KEY_HINT = (
    "Check the API key configured for this endpoint "
    "(for OpenAI: OPENAI_API_KEY or your openai_api_key secret)."
)
# ``code``/``type`` values of an error body or event, by what they mean.
_QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached", "billing_not_active"})
_RATE_LIMIT_CODES = frozenset({"rate_limit_exceeded", "rate_limit_error", "requests", "tokens"})
_OVERLOADED_CODES = frozenset({"overloaded", "overloaded_error", "engine_overloaded", "server_overloaded"})
_AUTH_CODES = frozenset({"invalid_api_key", "authentication_error"})
_PERMISSION_CODES = frozenset({"permission_error", "unsupported_country_region_territory"})
_NOT_FOUND_CODES = frozenset({"model_not_found", "not_found_error", "previous_response_not_found"})
# The request itself is at fault: the same request fails again.
_BAD_REQUEST_CODES = frozenset(
    {
        "invalid_request_error",
        "context_length_exceeded",
        "invalid_prompt",
        "string_above_max_length",
        "bio_policy",
        "misalignment_policy_violation",
    }
)
_READ_TIMEOUTS = (httpx2.ReadTimeout, httpx.ReadTimeout)
_CONNECT_TIMEOUTS = (httpx2.ConnectTimeout, httpx.ConnectTimeout)


@dataclass(frozen=True)
class _ErrorBody:
    """The useful part of an OpenAI error body ``{"error": {...}}``."""

    message: str
    type: str
    code: str

    @classmethod
    def from_exception(cls, exc: openai.APIError) -> _ErrorBody:
        body = exc.body
        if isinstance(body, Mapping):
            inner = body.get("error", body)
            if isinstance(inner, Mapping):
                body = inner
        if not isinstance(body, Mapping):
            return cls(message=str(body or exc.message or "").strip(), type="", code="")
        message = body.get("message")
        return cls(
            message=str(message if message else exc.message or "").strip(),
            type=str(body.get("type") or ""),
            code=str(body.get("code") or ""),
        )


def default_where(base_url: str) -> str:
    return f"OpenAI-compatible provider at {base_url}"


def provider_error_from(
    exc: openai.OpenAIError,
    *,
    base_url: str,
    model: str,
    where: str | None = None,
    idle_timeout_s: float | None = None,
) -> ProviderError:
    """Map any SDK exception raised while creating or reading a response.

    ``where`` names the provider for the message (default: "OpenAI-compatible
    provider at <base_url>"). A read timeout means no byte arrived for the
    idle timeout: the stream stalled.
    """
    where = where or default_where(base_url)
    if isinstance(exc, openai.APITimeoutError):
        return _from_timeout(exc, where=where, idle_timeout_s=idle_timeout_s)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.message
        return _error(
            f"Could not reach the {where}, or it broke the connection: {cause}", ErrorKind.CONNECTION
        )
    if isinstance(exc, openai.APIStatusError):
        return _from_status(exc, where=where, model=model)
    if isinstance(exc, openai.APIError):
        body = _ErrorBody.from_exception(exc)
        return error_from_event(code=body.code, error_type=body.type, message=body.message, where=where)
    return _error(f"{where} failed: {exc}", ErrorKind.OTHER, retryable=False)


def error_from_event(
    *, code: str | None, error_type: str | None, message: str | None, where: str
) -> ProviderError:
    """An error reported inside a 200 response: Chat's ``data: {"error": …}``,
    the Responses ``error`` event or a ``response.failed`` response. Assume a
    server-side failure unless the code names the request's or the account's fault."""
    names = {code or "", error_type or ""}
    label = code or error_type or "error"
    text = (message or "no details given").strip()
    if names & _QUOTA_CODES:
        return _error(
            f"{where} says the account is out of quota; check its plan and billing ({label}): {text}",
            ErrorKind.QUOTA,
        )
    if names & _RATE_LIMIT_CODES:
        return _error(f"{where} is rate limiting requests ({label}): {text}", ErrorKind.RATE_LIMIT)
    if names & _OVERLOADED_CODES:
        return _error(f"{where} is overloaded ({label}): {text}", ErrorKind.OVERLOADED)
    if names & _AUTH_CODES:
        return _error(
            with_hint(f"{where} rejected the API key ({label}): {text}", KEY_HINT),
            ErrorKind.AUTHENTICATION,
        )
    if names & _PERMISSION_CODES:
        return _error(f"{where} refused access with this API key ({label}): {text}", ErrorKind.PERMISSION)
    if names & _NOT_FOUND_CODES:
        return _error(f"{where} could not find what the request named ({label}): {text}", ErrorKind.NOT_FOUND)
    if names & _BAD_REQUEST_CODES:
        return _error(f"{where} rejected the request mid-stream ({label}): {text}", ErrorKind.BAD_REQUEST)
    return _error(f"{where} failed mid-stream ({label}): {text}", ErrorKind.SERVER)


def protocol_error(where: str, detail: str) -> ProviderError:
    """The response broke the wire format: malformed JSON, or the stream
    ended without its terminal event (a proxy cut it short)."""
    return _error(f"{where} {detail}", ErrorKind.PROTOCOL)


def total_timeout_error(where: str, timeout_s: float) -> ProviderError:
    """The turn kept streaming past the adapter's total ``timeout_s``."""
    return _error(f"{where} did not finish the answer within {timeout_s:g} s", ErrorKind.CONNECTION)


def _from_timeout(exc: openai.APITimeoutError, *, where: str, idle_timeout_s: float | None) -> ProviderError:
    cause = exc.__cause__
    if isinstance(cause, _CONNECT_TIMEOUTS):
        return _error(f"Could not connect to the {where} in time: {exc.message}", ErrorKind.CONNECTION)
    if isinstance(cause, _READ_TIMEOUTS):
        after = f" for {idle_timeout_s:g} s" if idle_timeout_s is not None else ""
        return _error(f"{where} stopped sending data{after}; the stream stalled", ErrorKind.STALLED)
    return _error(f"{where} did not answer in time: {exc.message}", ErrorKind.CONNECTION)


def _from_status(exc: openai.APIStatusError, *, where: str, model: str) -> ProviderError:
    status = exc.status_code
    body = _ErrorBody.from_exception(exc)
    detail = f"({status}{' ' + body.code if body.code else ''}): {body.message}"
    names = {body.code, body.type}
    if status in (400, 422):
        message, kind = f"{where} rejected the request {detail}", ErrorKind.BAD_REQUEST
    elif status == 401:
        message, kind = (
            with_hint(f"{where} rejected the API key {detail}", KEY_HINT),
            ErrorKind.AUTHENTICATION,
        )
    elif status == 403:
        message, kind = f"{where} refused access with this API key {detail}", ErrorKind.PERMISSION
    elif status == 404:
        hint = "check the model name and base URL"
        message, kind = (
            f"{where} does not know model {model!r} or the endpoint; {hint} {detail}",
            ErrorKind.NOT_FOUND,
        )
    elif status == 429 and names & _QUOTA_CODES:
        hint = "check its plan and billing"
        message, kind = f"{where} says the account is out of quota; {hint} {detail}", ErrorKind.QUOTA
    elif status == 429:
        message, kind = f"{where} is rate limiting requests {detail}", ErrorKind.RATE_LIMIT
    elif status == 408:
        message, kind = f"{where} timed out the request {detail}", ErrorKind.CONNECTION
    elif status == 409:
        message, kind = f"{where} asked to retry the request {detail}", ErrorKind.SERVER
    elif status == 529 or (
        status == 503 and ("overload" in body.message.lower() or names & _OVERLOADED_CODES)
    ):
        message, kind = f"{where} is overloaded {detail}", ErrorKind.OVERLOADED
    elif status >= 500:
        message, kind = f"{where} had a server error {detail}", ErrorKind.SERVER
    else:
        message, kind = f"{where} rejected the request {detail}", ErrorKind.BAD_REQUEST
    retry_after = retry_after_from_headers(exc.response.headers) if exc.response is not None else None
    return _error(message, kind, status_code=status, retry_after_s=retry_after)


def _error(
    message: str,
    kind: ErrorKind,
    *,
    retryable: bool | None = None,
    status_code: int | None = None,
    retry_after_s: float | None = None,
) -> ProviderError:
    return ProviderError(
        message,
        retryable=kind in RETRYABLE_KINDS if retryable is None else retryable,
        status_code=status_code,
        kind=kind,
        retry_after_s=retry_after_s,
    )
