"""How often and how patiently a model turn is retried, one policy per
provider kind (docs/providers.md, "Errors and retries", and the vendors' SDK
defaults).

Only transient failures are retried (``ProviderError.retryable``): rate
limits, overload, 5xx, connection trouble, stalled streams. A provider's own
Retry-After wins over our backoff when it is longer, up to ``max_wait_s``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class TurnRetryPolicy:
    max_attempts: int
    initial_s: float
    max_wait_s: float

    def delay(self, failed_attempt: int, hint_s: float | None = None) -> float:
        """Seconds to wait after attempt ``failed_attempt`` (1-based) failed."""
        backoff = min(self.initial_s * 2 ** (failed_attempt - 1), self.max_wait_s)
        backoff *= 1 - 0.25 * random.random()  # jitter, as the vendors' SDKs do
        if hint_s is not None:
            return min(max(backoff, hint_s), self.max_wait_s)
        return backoff


def policy_for(kind: str) -> TurnRetryPolicy:
    base = TurnRetryPolicy(
        max_attempts=settings.CHATFORGE_LLM_MAX_ATTEMPTS,
        initial_s=settings.CHATFORGE_LLM_RETRY_INITIAL_S,
        max_wait_s=settings.CHATFORGE_LLM_RETRY_MAX_WAIT_S,
    )
    if kind == "ollama":
        # A local server that is busy frees up quickly; no point waiting long.
        return TurnRetryPolicy(base.max_attempts, base.initial_s, min(base.max_wait_s, 10.0))
    return base
