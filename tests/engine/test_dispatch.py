"""Sending a round's tool calls (orchestration/queueing/dispatch.py): every call's
message reaches the broker, in one round trip, once the round's transaction
commits; a round that cannot be sent is left to the sweeper as a single
step is. Against real Redis servers: a private one where only this test
talks (its own count of requests read), and a port where nothing listens.
"""

from __future__ import annotations

import base64
import json

import pytest
from django.db import transaction

from chatforge.conversations.models import Conversation, Run
from orchestration.queueing import dispatch
from orchestration.services.runs import RunOptions, run_start
from tests.engine.test_infrastructure_failures import broker_at
from tests.engine.test_redelivery import enqueued
from tests.support.private_services import private_redis
from tests.support.stack import free_port

pytestmark = pytest.mark.django_db(transaction=True)

ROUND = [(f"call_{position}", "echo", position) for position in range(5)]


def new_run(user) -> Run:
    return run_start(user=user, conversation=Conversation.objects.create(user=user), content="go",
                     options=RunOptions(model="demo"))


def test_a_rounds_calls_reach_the_broker_in_one_round_trip_after_the_commit(make_user, settings):
    settings.CHATFORGE_MESSAGE_RATE = ""
    user, _ = make_user()
    with private_redis() as server, broker_at(server.url()):
        broker = server.client()
        run = new_run(user)  # sends turn 0: the producer's connection is made
        with transaction.atomic():
            dispatch.tool_calls(run, ROUND)
            assert [name for name, _ in enqueued(broker)] == ["chatforge.llm_turn"]  # nothing before the commit
            reads_before = broker.info("stats")["total_reads_processed"]
        # The server's count includes each INFO: the one after is the second read.
        assert broker.info("stats")["total_reads_processed"] - reads_before == 2

        assert enqueued(broker) == sorted([("chatforge.llm_turn", [str(run.id), 0]),
                                           *[("chatforge.tool_call", [str(run.id), call_id])
                                             for call_id, _, _ in ROUND]])
        # In the round's order: the first call is the first a worker takes.
        assert [args[1] for args in in_taking_order(broker, "tools")] == [call_id for call_id, _, _ in ROUND]


def in_taking_order(broker, queue: str) -> list[list]:
    """The args of the messages in ``queue``, the next a worker takes first
    (LPUSH adds on the left, BRPOP takes from the right)."""
    return [json.loads(base64.b64decode(json.loads(raw)["body"]))[0] for raw in reversed(broker.lrange(queue, 0, -1))]


def test_a_round_the_broker_refuses_is_left_to_the_sweeper(make_user, idle_broker, settings):
    settings.CHATFORGE_MESSAGE_RATE = ""
    user, _ = make_user()
    run = new_run(user)
    assert Run.objects.get(pk=run.pk).heartbeat_at is not None

    with broker_at(f"redis://127.0.0.1:{free_port()}/0"), transaction.atomic():
        dispatch.tool_calls(run, ROUND)  # commits, then the send fails: no exception reaches the caller

    assert Run.objects.get(pk=run.pk).heartbeat_at is None  # marked: the sweeper's next pass sends its steps
    assert [name for name, _ in enqueued(idle_broker)] == ["chatforge.llm_turn"]
