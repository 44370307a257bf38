"""Pooled database connections go back to the pool when a unit of work ends:
a Celery task, a renewal of the heartbeat thread, the setup of a streaming
response, one database call from async code. This process runs with the
pool (``chatforge/settings/database.py``), so these are the real pool and
real Postgres connections."""

from __future__ import annotations

from datetime import timedelta

import threading

import pytest
from django.utils import timezone
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.http import StreamingHttpResponse
from django.test import RequestFactory

from chatforge.conversations.models import Conversation, LlmTurn
from chatforge.db.connections import ReleaseBeforeStreaming, db_sync_to_async, is_pooled
from orchestration import tasks
from orchestration.services import heartbeat
from orchestration.services.runs import RunOptions, run_start

pytestmark = pytest.mark.django_db(transaction=True)


def _holds_connection() -> bool:
    return connection.connection is not None


def _in_thread(work) -> object:
    box: list[object] = []
    thread = threading.Thread(target=lambda: box.append(work()))
    thread.start()
    thread.join(60)
    return box[0]


def test_this_process_uses_the_pool():
    assert is_pooled(connection)
    assert connection.settings_dict["CONN_MAX_AGE"] == 0


def test_a_task_keeps_no_connection_after_it_ends(idle_broker):
    def run_task() -> tuple[bool, bool]:
        get_user_model().objects.exists()  # a connection left over from before the task
        before = _holds_connection()
        tasks.sweep_stalled_runs.apply()  # the sweeper reads the database
        return before, _holds_connection()

    assert _in_thread(run_task) == (True, False)


def test_the_heartbeat_gives_its_connection_back_after_each_renewal(
        make_user, idle_broker, settings, monkeypatch):
    settings.CHATFORGE_HEARTBEAT_S = 0.05
    settings.CHATFORGE_MESSAGE_RATE = ""
    user, _ = make_user()
    run = run_start(user=user, conversation=Conversation.objects.create(user=user), content="hi",
                    options=RunOptions(model="demo"))
    turn = LlmTurn.objects.get(run=run, iteration=0)
    claimed_at = timezone.now() - timedelta(seconds=5)
    LlmTurn.objects.filter(pk=turn.pk).update(status="running", heartbeat_at=claimed_at)  # as a claim leaves it
    renewed = threading.Event()
    held_after_renewal: list[bool] = []
    real_release = heartbeat.release_connections

    def observed_release() -> None:
        real_release()
        held_after_renewal.append(_holds_connection())  # in the heartbeat thread itself
        renewed.set()

    monkeypatch.setattr(heartbeat, "release_connections", observed_release)
    with heartbeat.step_lease(str(run.id), turn):
        assert renewed.wait(30), "the heartbeat never renewed the lease"
    assert held_after_renewal and not any(held_after_renewal)
    turn.refresh_from_db()
    assert turn.heartbeat_at > claimed_at


async def _borrowing_view(request):
    await sync_to_async(get_user_model().objects.exists)()  # in the request's thread
    return StreamingHttpResponse(iter([b"data: x\n\n"]))


@pytest.mark.asyncio
@pytest.mark.parametrize("released", [True, False])
async def test_a_streaming_response_gives_the_views_connection_back_first(released):
    view = ReleaseBeforeStreaming(_borrowing_view) if released else _borrowing_view
    async with ThreadSensitiveContext():
        response = await view(RequestFactory().get("/stream"))
        held = await sync_to_async(_holds_connection)()
        await sync_to_async(lambda: connection.close())()
    assert response.streaming
    assert held is not released  # without the middleware the stream would keep it


def test_the_middleware_works_for_sync_views_too():
    def sync_view(request):
        get_user_model().objects.exists()
        return StreamingHttpResponse(iter([b"x"]))

    def serve() -> bool:
        ReleaseBeforeStreaming(sync_view)(RequestFactory().get("/stream"))
        return _holds_connection()

    assert _in_thread(serve) is False


@pytest.mark.asyncio
async def test_db_sync_to_async_returns_the_connection_after_each_call():
    async with ThreadSensitiveContext():
        assert await db_sync_to_async(get_user_model().objects.exists)() is False
        assert await sync_to_async(_holds_connection)() is False


def test_db_sync_to_async_leaves_a_connection_inside_a_transaction_alone():
    """Closing it would end the transaction (Channels' database_sync_to_async does)."""
    def in_transaction() -> bool:
        from asgiref.sync import async_to_sync

        with transaction.atomic():
            get_user_model().objects.exists()
            async_to_sync(db_sync_to_async(get_user_model().objects.exists))()
            return _holds_connection() and connection.in_atomic_block

    assert _in_thread(in_transaction) is True
