"""Turn google-genai / httpx exceptions into ``ProviderError``s a person can act on.

Gemini's error body is ``{"error": {"code", "message", "status", "details":
[…]}}``; ``details`` may hold an ``ErrorInfo`` (``reason``, e.g.
``API_KEY_INVALID``), a ``RetryInfo`` (``retryDelay`` "37s") and a
``QuotaFailure`` (``violations[].quotaId``). Classification (docs/providers.md,
"Errors and retries"):

* 400 ``API_KEY_INVALID`` (and 401) → AUTHENTICATION; other 400/422 → BAD_REQUEST
* 403 → PERMISSION, 404 → NOT_FOUND
* 429 whose QuotaFailure is per day (``quotaId`` contains "PerDay") → QUOTA,
  not retryable: it will not pass before tomorrow; other 429 → RATE_LIMIT with
  ``retry_after_s`` from ``retryDelay`` (else the Retry-After header)
* 503 → OVERLOADED; 500, 504 and other 5xx → SERVER
* connect errors, resets, total timeout → CONNECTION; no byte for the idle
  timeout → STALLED; an unparsable body → PROTOCOL
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from google.genai import errors as genai_errors

from chatforge.llm.providers.base import RETRYABLE_KINDS, ErrorKind, ProviderError
from chatforge.llm.providers.error_text import with_hint
from chatforge.llm.providers.retry_hints import retry_after_from_headers, seconds_from_duration

KEY_HINT = "Check GEMINI_API_KEY or your gemini_api_key secret."
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_QUOTA_FAILURE = "type.googleapis.com/google.rpc.QuotaFailure"
_KEY_REASONS = frozenset({"API_KEY_INVALID", "API_KEY_EXPIRED", "API_KEY_SERVICE_BLOCKED"})


@dataclass(frozen=True)
class GeminiErrorBody:
    """The useful part of ``{"error": {...}}``."""

    code: int | None
    status: str
    message: str
    reasons: tuple[str, ...] = ()
    retry_delay: str | None = None
    quota_ids: tuple[str, ...] = field(default=())

    @classmethod
    def parse(cls, payload: Any, *, fallback_message: str = "") -> GeminiErrorBody:
        inner = payload.get("error", payload) if isinstance(payload, Mapping) else None
        if not isinstance(inner, Mapping):
            return cls(code=None, status="", message=str(payload or fallback_message).strip())
        reasons: list[str] = []
        quota_ids: list[str] = []
        retry_delay: str | None = None
        for detail in inner.get("details") or ():
            if not isinstance(detail, Mapping):
                continue
            kind = detail.get("@type")
            if kind == _ERROR_INFO and detail.get("reason"):
                reasons.append(str(detail["reason"]))
            elif kind == _RETRY_INFO and detail.get("retryDelay"):
                retry_delay = str(detail["retryDelay"])
            elif kind == _QUOTA_FAILURE:
                for violation in detail.get("violations") or ():
                    if isinstance(violation, Mapping) and violation.get("quotaId"):
                        quota_ids.append(str(violation["quotaId"]))
        code = inner.get("code")
        return cls(
            code=code if isinstance(code, int) else None,
            status=str(inner.get("status") or ""),
            message=str(inner.get("message") or fallback_message).strip(),
            reasons=tuple(reasons),
            retry_delay=retry_delay,
            quota_ids=tuple(quota_ids),
        )

    @property
    def per_day_quota(self) -> bool:
        return any("perday" in quota_id.lower() for quota_id in self.quota_ids)


def error_from_api(exc: genai_errors.APIError, *, where: str, model: str) -> ProviderError:
    """An HTTP error status, or an ``{"error": …}`` event inside a 200 stream."""
    body = GeminiErrorBody.parse(exc.details, fallback_message=exc.message or "")
    status = int(exc.code or body.code or 0)
    labels = " ".join(part for part in (str(status), body.status or exc.status or "", *body.reasons) if part)
    detail = f"({labels}): {body.message or 'no message'}"
    retry_after: float | None = None

    if status == 401 or (status in (400, 403) and set(body.reasons) & _KEY_REASONS):
        kind, message = ErrorKind.AUTHENTICATION, with_hint(f"{where} rejected the API key {detail}", KEY_HINT)
    elif status == 403:
        kind, message = ErrorKind.PERMISSION, f"{where} refused access with this API key {detail}"
    elif status == 404:
        hint = "check the model name and the base URL"
        kind, message = ErrorKind.NOT_FOUND, f"{where} does not know model {model!r}; {hint} {detail}"
    elif status == 429 and body.per_day_quota:
        hint = "it resets daily; raise the limit or enable billing in Google AI Studio"
        kind, message = ErrorKind.QUOTA, f"{where} says the daily quota is used up; {hint} {detail}"
    elif status == 429:
        retry_after = seconds_from_duration(body.retry_delay) or _header_hint(exc)
        kind, message = ErrorKind.RATE_LIMIT, f"{where} is rate limiting requests {detail}"
    elif status == 503:
        kind, message = ErrorKind.OVERLOADED, f"{where} is overloaded {detail}"
        retry_after = seconds_from_duration(body.retry_delay) or _header_hint(exc)
    elif status == 408:
        kind, message = ErrorKind.CONNECTION, f"{where} timed out the request {detail}"
    elif status >= 500:
        kind, message = ErrorKind.SERVER, f"{where} had a server error {detail}"
    elif status in (400, 422) or 400 <= status < 500:
        kind, message = ErrorKind.BAD_REQUEST, f"{where} rejected the request {detail}"
    else:
        kind, message = ErrorKind.OTHER, f"{where} failed {detail}"
    return ProviderError(
        message,
        retryable=kind in RETRYABLE_KINDS,
        status_code=status or None,
        kind=kind,
        retry_after_s=retry_after,
    )


def _header_hint(exc: genai_errors.APIError) -> float | None:
    headers = getattr(getattr(exc, "response", None), "headers", None)
    try:
        return retry_after_from_headers(dict(headers)) if headers is not None else None
    except (TypeError, ValueError):
        return None


def error_from_transport(
    exc: httpx.HTTPError, *, where: str, idle_timeout_s: float, received_any: bool
) -> ProviderError:
    """Network trouble below HTTP: never the request's fault, always retryable."""
    if isinstance(exc, httpx.ReadTimeout):
        when = "stopped sending mid-stream" if received_any else "sent nothing"
        return ProviderError(
            f"{where} {when} for {idle_timeout_s:g} s; giving up on this attempt",
            retryable=True,
            kind=ErrorKind.STALLED,
        )
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return ProviderError(
            f"Could not connect to {where}: {exc}", retryable=True, kind=ErrorKind.CONNECTION
        )
    if isinstance(exc, httpx.TimeoutException):
        return ProviderError(f"{where} timed out: {exc}", retryable=True, kind=ErrorKind.CONNECTION)
    if isinstance(exc, httpx.RemoteProtocolError) and received_any:
        return ProviderError(
            f"{where} closed the connection mid-stream: {exc}", retryable=True, kind=ErrorKind.CONNECTION
        )
    return ProviderError(f"Connection to {where} failed: {exc}", retryable=True, kind=ErrorKind.CONNECTION)


def error_from_malformed(exc: Exception, *, where: str) -> ProviderError:
    """A body that is not the JSON Gemini promises (a proxy's HTML page, a cut event)."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return ProviderError(
        f"{where} sent a response that could not be read: {text[:300]}",
        retryable=True,
        kind=ErrorKind.PROTOCOL,
    )
