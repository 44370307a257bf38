"""One log line per failed provider call, the same for every adapter, with
structured fields for log pipelines (never the request or response body)."""

from __future__ import annotations

import logging

from chatforge.llm.providers.base import ProviderError

logger = logging.getLogger("chatforge.llm.providers")


def logged_failure(error: ProviderError, *, provider: str, model: str) -> ProviderError:
    logger.warning(
        "Provider call failed: %s",
        error.message,
        extra={"provider": provider, "model": model, "kind": str(error.kind), "retryable": error.retryable},
    )
    return error
