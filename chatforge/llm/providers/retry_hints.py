"""How long a provider asked us to wait before retrying (docs/providers.md,
"Errors and retries").

One reader for the headers every vendor uses, so each adapter turns a
429/503 into ``ProviderError(retry_after_s=…)`` the same way: ``retry-after-ms``
first, then ``retry-after`` as seconds (floats allowed) or an HTTP date.
Values outside 0–120 s are ignored (the caller's backoff decides).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime

MAX_HINT_S = 120.0


def retry_after_from_headers(headers: Mapping[str, str] | None) -> float | None:
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    hint: float | None = None
    if "retry-after-ms" in lowered:
        try:
            hint = float(lowered["retry-after-ms"]) / 1000
        except ValueError:
            hint = None
    if hint is None and "retry-after" in lowered:
        value = lowered["retry-after"].strip()
        try:
            hint = float(value)
        except ValueError:
            try:
                hint = parsedate_to_datetime(value).timestamp() - time.time()
            except (TypeError, ValueError):
                hint = None
    if hint is None or not 0 <= hint <= MAX_HINT_S:
        return None
    return hint


def seconds_from_duration(text: str | None) -> float | None:
    """Gemini's ``retryDelay`` ("37s", "1.5s") in seconds."""
    if not text or not text.endswith("s"):
        return None
    try:
        value = float(text[:-1])
    except ValueError:
        return None
    return value if 0 <= value <= MAX_HINT_S else None
