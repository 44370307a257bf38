"""Infrastructure failures are not the model's: an unreachable broker leaves
the run in the outbox for the sweeper, and an event log that goes away mid-turn
hands the turn back to be run again instead of failing the run. Real
failures: a broker URL nobody listens on, a private redis-server killed
mid-stream."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection

from chatforge.celery import app
from chatforge.conversations.models import Conversation, LlmTurn, Message, Run
from orchestration import tasks
from orchestration.event_log import get_event_log, reset_event_log
from orchestration.event_log.events import EventLogUnavailable
from orchestration.services.runs import RunOptions, run_start
from orchestration.services.sweeper import sweep_stalled_runs
from tests.engine.test_redelivery import enqueued
from tests.support.private_services import private_redis
from tests.support.stack import free_port

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def broker_at(url: str) -> Iterator[None]:
    """Point this process's Celery app at another broker (its connection and
    producer pools are rebuilt from the URL on next use)."""
    old = app.conf.broker_url
    try:
        app.conf.broker_url = url
        app._pool = None
        app.amqp._producer_pool = None
        yield
    finally:
        app.conf.broker_url = old
        app._pool = None
        app.amqp._producer_pool = None


@contextmanager
def event_log_at(settings, url: str) -> Iterator[None]:
    settings.CHATFORGE_EVENT_LOG_REDIS_URL = url
    reset_event_log()
    try:
        yield
    finally:
        reset_event_log()


def new_run(user, **options) -> Run:
    return run_start(user=user, conversation=Conversation.objects.create(user=user), content="What is 6*7?",
                     options=RunOptions(model="demo", **options))


def test_a_run_whose_enqueue_fails_is_stored_and_sent_by_the_sweeper(make_user, idle_broker, settings):
    settings.CHATFORGE_MESSAGE_RATE = ""
    user, _ = make_user()
    with broker_at(f"redis://127.0.0.1:{free_port()}/0"):
        run = new_run(user)  # commits, then the enqueue is refused: no exception reaches the caller

    run.refresh_from_db()
    assert run.status == "queued" and run.heartbeat_at is None  # marked for the sweeper
    assert enqueued(idle_broker) == []

    assert sweep_stalled_runs() == 1  # the broker is back: the next pass sends it
    assert enqueued(idle_broker) == [("chatforge.llm_turn", [str(run.id), 0])]
    run.refresh_from_db()
    assert run.heartbeat_at is not None
    assert sweep_stalled_runs() == 0  # and only once


def test_post_during_a_broker_outage_answers_202_and_the_run_starts_later(make_user, idle_broker, settings):
    from rest_framework.test import APIClient

    settings.CHATFORGE_MESSAGE_RATE = ""
    user, token = make_user()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    conversation_id = api.post("/api/conversations/", {}, format="json").json()["id"]
    with broker_at(f"redis://127.0.0.1:{free_port()}/0"):
        first = api.post(f"/api/conversations/{conversation_id}/messages/", {"content": "hi"}, format="json",
                         HTTP_IDEMPOTENCY_KEY="outage-1")
        retry = api.post(f"/api/conversations/{conversation_id}/messages/", {"content": "hi"}, format="json",
                         HTTP_IDEMPOTENCY_KEY="outage-1")

    assert first.status_code == 202, first.content
    assert retry.status_code == 202 and retry.json()["run_id"] == first.json()["run_id"]
    assert Run.objects.filter(user=user).count() == 1
    sweep_stalled_runs()
    assert enqueued(idle_broker) == [("chatforge.llm_turn", [first.json()["run_id"], 0])]


def test_event_log_lost_mid_stream_hands_the_turn_back(make_user, idle_broker, settings, fake_llm):
    """redis-server killed while the model streams: the turn goes back to
    pending (not counted as a worker death), the run is not failed, and once
    Redis is back the same turn runs to the end."""
    from tests.fakes.openai_server import Reply

    settings.OPENAI_BASE_URL = fake_llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    fake_llm.add_script("log-lost-mid-stream", [Reply(text="word " * 100, chunk_delay_s=0.05)])
    user, _ = make_user()
    run = run_start(user=user, conversation=Conversation.objects.create(user=user), content="talk",
                    options=RunOptions(model="log-lost-mid-stream"))
    with private_redis() as redis_server, event_log_at(settings, redis_server.url(0)):
        raised: list[BaseException] = []

        def turn() -> None:
            try:
                tasks.llm_turn_execute(run_id=str(run.id), iteration=0)
            except BaseException as exc:  # noqa: BLE001 - checked below
                raised.append(exc)
            finally:
                connection.close()

        worker = threading.Thread(target=turn)
        worker.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if any(e["type"] == "content.delta" for e in get_event_log().read(str(run.id), after=0)):
                break
            time.sleep(0.05)
        else:
            pytest.fail("the model never started streaming")
        redis_server.kill()
        worker.join(60)

        assert len(raised) == 1 and isinstance(raised[0], EventLogUnavailable), raised
        turn_row = LlmTurn.objects.get(run=run, iteration=0)
        assert (turn_row.status, turn_row.deliveries, turn_row.heartbeat_at) == ("pending", 0, None)
        run.refresh_from_db()
        assert run.status == "running" and run.error == ""
        assert not Message.objects.filter(run=run, role="assistant").exists()

        redis_server.start()  # back, empty
        tasks.llm_turn_execute(run_id=str(run.id), iteration=0)  # the retry

    run.refresh_from_db()
    assert run.status == "completed", run.error
    assert LlmTurn.objects.get(run=run, iteration=0).deliveries == 1
    assert Message.objects.get(run=run, role="assistant").content.split() == ["word"] * 100  # all of it


def test_a_model_turn_of_a_deleted_run_stops(make_user, idle_broker, settings, fake_llm):
    """The streaming loop's cancel check sees the run gone and stops the model."""
    from tests.fakes.openai_server import Reply

    settings.OPENAI_BASE_URL = fake_llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    fake_llm.add_script("slow-for-delete", [Reply(text="word " * 200, chunk_delay_s=0.05)])
    user, _ = make_user()
    run = run_start(user=user, conversation=Conversation.objects.create(user=user), content="talk",
                    options=RunOptions(model="slow-for-delete"))
    finished = threading.Event()

    def turn() -> None:
        try:
            tasks.llm_turn_execute(run_id=str(run.id), iteration=0)
        finally:
            connection.close()
            finished.set()

    worker = threading.Thread(target=turn)
    worker.start()
    while not get_event_log().read(str(run.id), after=0):
        time.sleep(0.05)
    Conversation.objects.filter(pk=run.conversation_id).delete()
    assert finished.wait(30)
    assert not Run.objects.filter(pk=run.pk).exists()
    # The model was cut off, not streamed to its end (200 words).
    deltas = [e for e in get_event_log().read(str(run.id), after=0, count=1000) if e["type"] == "content.delta"]
    assert 0 < len(deltas) < 150
