"""Enqueueing steps. Always after the surrounding transaction commits, so a
worker never picks up a step whose rows it cannot see yet.

Tasks are sent by name, so the services that decide on a step never import
the task module (no import cycle between tasks and services).
"""

from __future__ import annotations

from django.db import transaction

from chatforge.celery import app

LLM_TURN = "chatforge.llm_turn"
TOOL_CALL = "chatforge.tool_call"
FINALIZE_RUN = "chatforge.finalize_run"


def llm_turn(run_id: str, iteration: int) -> None:
    transaction.on_commit(lambda: app.send_task(LLM_TURN, args=[str(run_id), iteration]))


def tool_call(run_id: str, tool_call_id: str) -> None:
    transaction.on_commit(lambda: app.send_task(TOOL_CALL, args=[str(run_id), tool_call_id]))
