"""Retrying one database write through a short outage, inside the step.

A step that fails on an unreachable database is normally handed back and
run again by a new delivery (``tasks.py``). That is right before the step's
work, but wrong after a model turn has streamed: the new delivery calls the
model again and streams the answer a second time (clients drop the first
copy on the repeated ``llm.started``, but the provider is paid twice and the
user waits twice). Under a burst the usual cause is no pooled connection
free within ``DATABASE_POOL_TIMEOUT_S``: bench/load.py saw 21 of 500 turns
streamed twice that way. So the write that records a finished turn is tried
again a few times, with a growing pause, before the step gives up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import DatabaseError

from chatforge.errors.outages import is_outage

logger = logging.getLogger(__name__)

T = TypeVar("T")

ATTEMPTS = 4
FIRST_PAUSE_S = 0.5


def retry_through_outage(write: Callable[[], T], *, what: str, attempts: int = ATTEMPTS,
                         first_pause_s: float = FIRST_PAUSE_S) -> T:
    """``write()``, called again after an outage error (the last one raises).
    ``write`` must be safe to repeat: a conditional update, one transaction."""
    pause = first_pause_s
    for attempt in range(1, attempts + 1):
        try:
            return write()
        except DatabaseError as exc:
            if attempt == attempts or not is_outage(exc):
                raise
            logger.warning("%s: the database did not answer (%s); trying again in %.1f s (attempt %d of %d)",
                           what, exc, pause, attempt + 1, attempts)
            time.sleep(pause)
            pause *= 2
    raise AssertionError("unreachable")
