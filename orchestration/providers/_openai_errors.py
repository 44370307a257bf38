"""Turn openai SDK exceptions into ``ProviderError``s a person can act on.

Retryability follows PROVIDERS.md §7: connection trouble, timeouts, 408, 409,
429 rate limits and 5xx may succeed later; 400/401/403/404/422 and a 429
``insufficient_quota`` (billing) never will. The message says whose problem
it is (the operator's key or model name, the server, the network), because it
ends up in front of someone who has to fix it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import openai

from orchestration.providers.base import ProviderError

RETRYABLE_STATUSES = frozenset({408, 409, 429})
# Error ``type``/``code`` values that mean the request itself is at fault, so
# an error event arriving mid-stream with one of them will not go away.
_CLIENT_FAULT_KINDS = frozenset(
    {
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "invalid_api_key",
        "model_not_found",
        "insufficient_quota",
        "context_length_exceeded",
    }
)


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


def provider_error_from(exc: openai.OpenAIError, *, base_url: str, model: str) -> ProviderError:
    """Map any SDK exception raised while creating or reading a stream."""
    where = f"OpenAI-compatible provider at {base_url}"
    if isinstance(exc, openai.APITimeoutError):
        return ProviderError(f"{where} did not answer in time: {exc.message}", retryable=True)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.message
        return ProviderError(f"Could not reach the {where}: {cause}", retryable=True)
    if isinstance(exc, openai.APIStatusError):
        return _from_status(exc, where=where, model=model)
    if isinstance(exc, openai.APIError):
        return _from_stream_error(exc, where=where)
    return ProviderError(f"{where} failed: {exc}", retryable=False)


def _from_status(exc: openai.APIStatusError, *, where: str, model: str) -> ProviderError:
    status = exc.status_code
    body = _ErrorBody.from_exception(exc)
    detail = f"({status}{' ' + body.code if body.code else ''}): {body.message}"
    if status == 401:
        message, retryable = f"{where} rejected the API key {detail}", False
    elif status == 403:
        message, retryable = f"{where} refused access with this API key {detail}", False
    elif status == 404:
        hint = "check the model name and base URL"
        message, retryable = f"{where} does not know model {model!r} or the endpoint; {hint} {detail}", False
    elif status == 429 and "insufficient_quota" in (body.code, body.type):
        hint = "check its plan and billing"
        message, retryable = f"{where} says the account is out of quota; {hint} {detail}", False
    elif status == 429:
        message, retryable = f"{where} is rate limiting requests {detail}", True
    elif status in RETRYABLE_STATUSES:
        message, retryable = f"{where} asked to retry the request {detail}", True
    elif status >= 500:
        message, retryable = f"{where} had a server error {detail}", True
    else:
        message, retryable = f"{where} rejected the request {detail}", False
    return ProviderError(message, retryable=retryable, status_code=status)


def _from_stream_error(exc: openai.APIError, *, where: str) -> ProviderError:
    """An ``{"error": ...}`` event after the stream began (HTTP status was 200).
    Assume a server-side failure unless the error names the request's fault."""
    body = _ErrorBody.from_exception(exc)
    retryable = not ({body.type, body.code} & _CLIENT_FAULT_KINDS)
    kind = body.code or body.type or "error"
    return ProviderError(f"{where} failed mid-stream ({kind}): {body.message}", retryable=retryable)
