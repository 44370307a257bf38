"""Whether a run's missing log may start at seq 1, or must continue above a
floor because an earlier log of the same run was lost.

The event log is disposable (Redis can expire, trim or lose it); Postgres
holds the truth. A run's log is legitimately created from nothing exactly
once: by the first event the run ever publishes. That is either
``run.started`` from the first delivery of turn 0, or a terminal event of a
run that ended before turn 0 was ever claimed (cancelled while queued).
Every other append to a missing log means the log was lost mid-way; the
backend then starts the new log above a floor (see
docs/decisions/0006-snapshots.md) so seqs keep rising for every client.

Asked only when the log is missing, so it costs one query per run (its first
event) plus one per lost log.
"""

from __future__ import annotations

import logging

from django.core.exceptions import SynchronousOnlyOperation, ValidationError
from django.db import DatabaseError

from .base import Event

logger = logging.getLogger(__name__)


def log_may_start_fresh(run_id: str, event: Event) -> bool:
    # Imported when first asked: the event log's package is also used where
    # Django's app registry is not loaded (bench/relay.py, a bare gevent
    # process in tests/engine/test_append_group.py), and models cannot be
    # imported before it is.
    from chatforge.conversations.models import LlmTurn

    try:
        deliveries = (
            LlmTurn.objects.filter(run_id=run_id, iteration=0).values_list("deliveries", flat=True).first()
        )
    except (ValueError, ValidationError):
        return True  # not a run id (a test's or a tool's own log)
    except (DatabaseError, SynchronousOnlyOperation):
        # Cannot tell: a floor is the safe answer (a jump in seq, never a repeat).
        logger.warning("cannot tell whether run %s published before; continuing its log above a floor", run_id)
        return False
    if deliveries is None or deliveries == 0:
        return True  # no such run, or turn 0 never claimed: nothing was published
    return event.get("type") == "run.started" and deliveries == 1
