"""Deleting a conversation: its runs end first.

A run must not outlive its conversation: a model still streaming for a
deleted conversation would spend tokens nobody can read, escape the user's
active-run cap (which counts run rows) and leave clients following it
waiting. So deleting cancels every active run first — each is ended as
``cancelled`` and its ``run.cancelled`` event is published, which ends every
websocket, SSE and ``/v1`` stream following it — and then deletes the
conversation with its messages and runs. Workers still busy with one of its
steps see the run gone at their next cancel check (within a second) or
when they record their result, and stop.
"""

from __future__ import annotations

from chatforge.conversations.models import Conversation, Run

from .finalize import Outcome, run_finalize
from .runs import ACTIVE


def conversation_delete(*, conversation: Conversation) -> None:
    active = [str(run_id) for run_id in
              Run.objects.filter(conversation=conversation, status__in=ACTIVE).values_list("id", flat=True)]
    if active:
        Run.objects.filter(pk__in=active).update(cancel_requested=True)
    for run_id in active:
        run_finalize(run_id=run_id, outcome=Outcome.CANCELLED)
    conversation.delete()
