"""The run follower every reader of a run's events shares
(``orchestration/services/run_follower.py``), on a real Redis event log:
resuming after a seq, Redis going away mid-follow (the log kept, or lost
with it: then the run's end comes from Postgres), the idle ticks ``/v1``
keeps its stream alive with, and the sync wrapper the model validation
waits with. Runs are driven step by step in this process (the tasks called
directly, their follow-ups left on a broker no worker reads)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from redis.exceptions import ConnectionError as RedisConnectionError

from chatforge.conversations.models import Message, Run
from orchestration.event_log import get_event_log, reset_event_log
from orchestration.event_log.base import Event
from orchestration.services import run_follower
from orchestration.services.run_follower import RunFollower, follow_run, wait_for_run_end
from tests.fakes.openai_server import Reply
from tests.support import stepped_runs
from tests.support.private_services import PrivateRedis, private_redis
from tests.support.stepped_runs import finish, first_turn

pytestmark = pytest.mark.django_db(transaction=True)

TWO_ROUNDS = [
    Reply(text="Checking.", tool_calls=[("calculator", {"expression": "6*7"}), ("echo", {"text": "a"})]),
    Reply(text="The answer is 42."),
]


@pytest.fixture
def user(settings, fake_llm, idle_broker, make_user):
    settings.CHATFORGE_EVENT_LOG = "redis"
    settings.OPENAI_BASE_URL = fake_llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    fake_llm.add_script("follower-two-rounds", TWO_ROUNDS)
    reset_event_log()
    yield make_user()[0]
    reset_event_log()


@pytest.fixture
def redis_server(settings) -> Iterator[PrivateRedis]:
    """A redis-server of the test's own holding the event log, to stop and
    start again under a follower."""
    with private_redis() as server:
        settings.CHATFORGE_EVENT_LOG_REDIS_URL = server.url(0)
        reset_event_log()
        yield server
    reset_event_log()


def start(user) -> Run:
    return stepped_runs.start(user, model="follower-two-rounds")



def logged(run_id: str) -> list[Event]:
    return get_event_log().read(run_id, after=0)


def follow(run_id: str, **options) -> list[Event]:
    async def gather() -> list[Event]:
        found = [event async for event in follow_run(run_id, **options)]
        # The executor thread's database connection would outlive the test database.
        await sync_to_async(connections.close_all)()
        return found

    return asyncio.run(gather())


def redis_back_on_first_failure(monkeypatch, server: PrivateRedis, followers: list[RunFollower]) -> list:
    """Replace the follower's pause between retries: the first time a read
    failed, start Redis again (with what it saved, if anything). The
    outages the followers saw, one per pause."""
    seen: list = []

    async def pause(failures: int) -> None:
        seen.append(followers[0].outage)
        if len(seen) == 1:
            await asyncio.to_thread(server.start)

    monkeypatch.setattr(run_follower, "_pause", pause)
    return seen


@pytest.mark.parametrize("after", [0, 1, 5])
def test_a_follow_resumed_after_a_seq_gets_every_later_event_once(user, after):
    run = start(user)
    finish(run, first_turn(run))
    whole = logged(str(run.id))

    assert follow(str(run.id), after=after) == whole[after:]
    # Past the terminal event already: nothing, and the follow ends.
    assert follow(str(run.id), after=whole[-1]["seq"], block_ms=100) == []


def test_redis_going_away_mid_follow_is_ridden_over_from_the_same_seq(user, redis_server, monkeypatch):
    run = start(user)
    calls = first_turn(run)
    run_id = str(run.id)
    before = logged(run_id)
    followers: list[RunFollower] = []
    outages = redis_back_on_first_failure(monkeypatch, redis_server, followers)

    async def scenario() -> tuple[list[Event], list[Event], BaseException | None]:
        followers.append(follower := follow_run(run_id))
        got = [await anext(follower) for _ in before]  # all the log held: the reader is mid-run
        await sync_to_async(finish)(run, calls)  # the run goes on to its end...
        redis_server.client().save()  # ...and Redis keeps its log across the restart
        redis_server.kill()
        rest = [event async for event in follower]
        await sync_to_async(connections.close_all)()
        return got, rest, follower.outage

    got, rest, outage_at_the_end = asyncio.run(scenario())

    assert outages and all(isinstance(exc, RedisConnectionError) for exc in outages), outages
    assert outage_at_the_end is None
    assert got == before
    assert got + rest == logged(run_id)  # every event once, in order: no snapshot, nothing lost
    assert rest[-1]["type"] == "run.completed"


def test_a_log_lost_with_redis_mid_follow_ends_from_postgres(user, redis_server, monkeypatch):
    run = start(user)
    calls = first_turn(run)
    run_id = str(run.id)
    before = logged(run_id)
    followers: list[RunFollower] = []
    outages = redis_back_on_first_failure(monkeypatch, redis_server, followers)

    async def scenario() -> tuple[list[Event], list[Event], list[Event]]:
        followers.append(follower := follow_run(run_id, block_ms=200))
        got = [await anext(follower) for _ in before]
        await sync_to_async(finish)(run, calls)
        whole = await sync_to_async(logged)(run_id)
        redis_server.kill()  # nothing saved: it comes back empty
        rest = [event async for event in follower]
        await sync_to_async(connections.close_all)()
        return got, whole, rest

    got, whole, rest = asyncio.run(scenario())

    assert outages and isinstance(outages[0], RedisConnectionError)
    assert got == before
    snapshot, terminal = rest
    cursor = got[-1]["seq"]
    assert snapshot["type"] == "snapshot" and snapshot["seq"] == cursor + 1
    assert snapshot["data"]["reason"] == "log_missing" and snapshot["data"]["status"] == "completed"
    assert snapshot["data"]["message"]["content"] == "The answer is 42."
    assert snapshot["data"]["message"]["id"] == str(Message.objects.get(run=run, role="assistant").id)
    # The terminal event the lost log held, rebuilt from the run's row.
    assert terminal["seq"] == cursor + 2
    assert {k: v for k, v in terminal.items() if k not in ("seq", "ts")} == {
        k: v for k, v in whole[-1].items() if k not in ("seq", "ts")
    }


def test_an_idle_follower_gets_a_tick_after_each_wait_that_brought_nothing(user):
    run = start(user)  # queued: no worker delivers it

    async def first_three() -> list[Event | None]:
        follower = follow_run(str(run.id), idle=True, block_ms=50)
        ticks = [await anext(follower), await anext(follower)]
        await sync_to_async(first_turn)(run)
        ticks.append(await anext(follower))
        await follower.aclose()
        await sync_to_async(connections.close_all)()
        return ticks

    none, again, event = asyncio.run(first_three())
    assert none is None and again is None
    assert event == logged(str(run.id))[0]


def test_the_sync_wrapper_returns_the_terminal_event(user):
    run = start(user)
    finish(run, first_turn(run))

    assert wait_for_run_end(str(run.id), timeout_s=60) == logged(str(run.id))[-1]


def test_the_sync_wrapper_gives_the_end_from_postgres_when_the_log_is_gone(user):
    run = start(user)
    finish(run, first_turn(run))
    terminal = logged(str(run.id))[-1]
    get_event_log().delete(str(run.id))

    rebuilt = wait_for_run_end(str(run.id), timeout_s=60)
    assert rebuilt["seq"] == 2  # after the snapshot (seq 1) standing in for the lost log
    assert {k: v for k, v in rebuilt.items() if k not in ("seq", "ts")} == {
        k: v for k, v in terminal.items() if k not in ("seq", "ts")
    }


def test_the_sync_wrapper_times_out_on_a_run_that_does_not_end(user):
    run = start(user)  # queued: no worker delivers it

    with pytest.raises(TimeoutError):
        wait_for_run_end(str(run.id), timeout_s=0.5)


def test_the_sync_wrapper_reports_an_event_log_unreachable_at_the_deadline_as_the_outage(user, redis_server):
    run = start(user)
    redis_server.kill()

    with pytest.raises(RedisConnectionError):
        wait_for_run_end(str(run.id), timeout_s=2)
