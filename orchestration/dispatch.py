"""Enqueueing steps. Always after the surrounding transaction commits, so a
worker never picks up a step whose rows it cannot see yet.

Postgres is the outbox: a step is a row (written in the transaction that
decided it) before its message is sent. When sending fails — the broker is
unreachable — nothing is lost and the caller is not failed: the run's
heartbeat is cleared, which the stalled-run sweeper takes as "send this
run's next step again", and its next pass after the broker is back does so
(steps are idempotent, so a message that did get through twice is harmless).

Tasks are sent by name, so the services that decide on a step never import
the task module (no import cycle between tasks and services).
"""

from __future__ import annotations

import logging

from django.db import DatabaseError, transaction

from chatforge.celery import app
from chatforge.conversations.models import Run

logger = logging.getLogger(__name__)

LLM_TURN = "chatforge.llm_turn"
TOOL_CALL = "chatforge.tool_call"
FINALIZE_RUN = "chatforge.finalize_run"


def _mark_for_redispatch(run_id: str) -> None:
    try:
        Run.objects.filter(pk=run_id, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]).update(heartbeat_at=None)
    except DatabaseError:
        # The database is out too: the run's heartbeat goes stale on its own,
        # and the sweeper re-sends its step after CHATFORGE_RUN_STALL_S.
        logger.exception("run %s: could not mark it for re-sending", run_id)


def _send_after_commit(run_id: str, task: str, args: list) -> None:
    def send() -> None:
        try:
            app.send_task(task, args=args)
        except Exception as exc:  # kombu OperationalError, redis errors: the broker is unreachable
            logger.warning("run %s: enqueueing %s failed (%s: %s); the sweeper will send it again",
                           run_id, task, type(exc).__name__, exc)
            _mark_for_redispatch(run_id)

    transaction.on_commit(send)


def llm_turn(run_id: str, iteration: int) -> None:
    _send_after_commit(str(run_id), LLM_TURN, [str(run_id), iteration])


def tool_call(run_id: str, tool_call_id: str) -> None:
    _send_after_commit(str(run_id), TOOL_CALL, [str(run_id), tool_call_id])
