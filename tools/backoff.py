"""How long to wait before retrying a tool call.

Exponential backoff with full jitter: the delay is drawn uniformly from
``[0, min(backoff_max_s, backoff_initial_s * 2**(attempt-1))]``, so many runs
hitting the same failing service do not retry in lock-step.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from tools.base import ToolPolicy

# 2**64 times any sane initial delay is far beyond any cap; stopping the
# exponent there keeps the arithmetic in range for absurd attempt numbers.
_MAX_EXPONENT = 64


def backoff_ceiling(policy: ToolPolicy, failed_attempt: int) -> float:
    """The largest delay allowed after attempt number ``failed_attempt`` (1-based) failed."""
    exponent = min(max(failed_attempt - 1, 0), _MAX_EXPONENT)
    return min(policy.backoff_max_s, policy.backoff_initial_s * 2.0**exponent)


def backoff_delay(
    policy: ToolPolicy,
    failed_attempt: int,
    *,
    rand: Callable[[], float] = random.random,
) -> float:
    """A jittered delay in ``[0, backoff_ceiling]``; ``rand`` is injectable for tests."""
    return backoff_ceiling(policy, failed_attempt) * rand()
