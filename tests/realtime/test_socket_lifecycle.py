"""How the event sockets end, in process with Channels' WebsocketCommunicator:
close codes, and background tasks cancelled however the consumer ends."""

from __future__ import annotations

import asyncio
import gc
from contextlib import suppress

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from django.contrib.auth.models import AnonymousUser
from django.db import connections

from chatforge.conversations.models import Conversation, Run
from chatforge.realtime import close_codes
from chatforge.realtime.routing import websocket_urlpatterns
from orchestration.services.runs import RunOptions, run_start
from tests.realtime.communicator import WebsocketCommunicator
from tests.realtime.conftest import start
from tests.support.stepped_runs import finish, first_turn

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

TERMINAL = {"run.completed", "run.failed", "run.cancelled"}


@pytest_asyncio.fixture(autouse=True)
async def _close_connections():
    """The consumers' database thread keeps connections the test database must not outlive."""
    yield
    await sync_to_async(connections.close_all)()


@pytest.fixture
def loop_errors():
    """Whatever asyncio reports to the loop's exception handler during the
    test ("Task exception was never retrieved" among them)."""
    loop = asyncio.get_event_loop()
    reported: list[dict] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    yield reported
    loop.set_exception_handler(previous)


@pytest.fixture
def live_run(make_user, idle_broker) -> tuple:
    """A queued run nobody executes (its first turn waits on an idle broker):
    a socket following it waits for events until it ends."""
    user, _ = make_user()
    run = run_start(user=user, conversation=Conversation.objects.create(user=user), content="hello",
                    options=RunOptions(model="demo"))
    return user, run


def socket_to(path: str, user) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    communicator.scope["user"] = user
    return communicator


def tasks_named(prefix: str) -> list[asyncio.Task]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith(prefix) and not t.done()]


async def output_after_cancel(communicator: WebsocketCommunicator) -> list[dict]:
    """Cancel the consumer as a server does when it shuts down; what it sent."""
    communicator.future.cancel()
    with suppress(asyncio.CancelledError):
        await communicator.future
    sent = []
    while not communicator.output_queue.empty():
        sent.append(communicator.output_queue.get_nowait())
    return sent


async def test_an_exception_in_dispatch_closes_1011_and_cancels_the_tail(live_run, loop_errors):
    user, run = live_run
    communicator = socket_to(f"/ws/runs/{run.id}/", user)
    connected, _ = await communicator.connect()
    assert connected
    assert len(tasks_named(f"run-events:{run.id}")) == 1

    # A message type no handler takes makes Channels' dispatch raise.
    await communicator.send_input({"type": "websocket.unexpected"})
    assert await communicator.receive_output() == {"type": "websocket.close", "code": close_codes.INTERNAL_ERROR}
    await communicator.wait()
    assert tasks_named(f"run-events:{run.id}") == []
    gc.collect()
    await asyncio.sleep(0)
    assert loop_errors == []


async def test_a_client_leaving_cancels_the_tail(live_run, loop_errors):
    user, run = live_run
    communicator = socket_to(f"/ws/runs/{run.id}/?after=3", user)
    assert (await communicator.connect())[0]
    assert len(tasks_named(f"run-events:{run.id}")) == 1

    await communicator.disconnect(code=1001)
    assert tasks_named(f"run-events:{run.id}") == []
    assert loop_errors == []


async def test_a_server_shutting_down_gets_1001_and_the_tail_is_cancelled(live_run, loop_errors):
    user, run = live_run
    communicator = socket_to(f"/ws/runs/{run.id}/", user)
    assert (await communicator.connect())[0]

    sent = await output_after_cancel(communicator)
    assert sent == [{"type": "websocket.close", "code": close_codes.GOING_AWAY}]
    assert tasks_named(f"run-events:{run.id}") == []
    assert loop_errors == []


async def test_the_terminal_event_is_followed_by_1000(make_user, idle_broker, fake_llm, settings):
    settings.OPENAI_BASE_URL = fake_llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    from tests.realtime.conftest import TWO_ROUNDS
    fake_llm.add_script("rt-two-rounds", TWO_ROUNDS)
    user, _ = await sync_to_async(make_user)()

    def finished() -> Run:
        run = start(user)
        finish(run, first_turn(run))
        return run

    run = await sync_to_async(finished)()
    communicator = socket_to(f"/ws/runs/{run.id}/", user)
    assert (await communicator.connect())[0]
    events = []
    while not (events and events[-1]["type"] in TERMINAL):
        events.append(await communicator.receive_json_from(timeout=5))
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert await communicator.receive_output(timeout=5) == {"type": "websocket.close", "code": close_codes.NORMAL}
    await communicator.disconnect()


async def test_unauthenticated_and_unknown_are_refused_with_4401_and_4404(live_run, make_user):
    _, run = live_run
    anonymous = socket_to(f"/ws/runs/{run.id}/", AnonymousUser())
    assert await anonymous.connect() == (False, close_codes.UNAUTHENTICATED)
    other, _ = await sync_to_async(make_user)()
    someone_else = socket_to(f"/ws/runs/{run.id}/", other)
    assert await someone_else.connect() == (False, close_codes.NOT_FOUND)
    conversation = socket_to(f"/ws/conversations/{run.conversation_id}/", other)
    assert await conversation.connect() == (False, close_codes.NOT_FOUND)


async def test_the_conversation_socket_cancels_its_watcher_and_tails_on_an_exception(live_run, loop_errors):
    user, run = live_run
    communicator = socket_to(f"/ws/conversations/{run.conversation_id}/", user)
    assert (await communicator.connect())[0]
    for _ in range(50):  # the watcher's first look finds the queued run and follows it
        if tasks_named(f"conversation-run-events:{run.id}"):
            break
        await asyncio.sleep(0.05)
    assert len(tasks_named(f"conversation-watch:{run.conversation_id}")) == 1
    assert len(tasks_named(f"conversation-run-events:{run.id}")) == 1

    await communicator.send_input({"type": "websocket.unexpected"})
    assert await communicator.receive_output() == {"type": "websocket.close", "code": close_codes.INTERNAL_ERROR}
    await communicator.wait()
    assert tasks_named("conversation-") == []
    gc.collect()
    await asyncio.sleep(0)
    assert loop_errors == []


async def test_a_deleted_conversation_closes_its_socket_with_4404(live_run):
    user, run = live_run
    communicator = socket_to(f"/ws/conversations/{run.conversation_id}/", user)
    assert (await communicator.connect())[0]
    await sync_to_async(Conversation.objects.filter(pk=run.conversation_id).delete)()
    message = await communicator.receive_output(timeout=10)
    while message["type"] == "websocket.send":  # the run's own end may come first
        message = await communicator.receive_output(timeout=10)
    assert message == {"type": "websocket.close", "code": close_codes.NOT_FOUND}
    await communicator.disconnect()
