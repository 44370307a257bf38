"""Runs driven step by step in this process (the tasks called directly, their
follow-ups left on a broker no worker reads), with either event log."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from chatforge.conversations.models import Run
from orchestration.event_log import get_event_log, reset_event_log
from orchestration.services.run_follower import follow_run
from tests.fakes.openai_server import Reply
from tests.support import stepped_runs
from tests.support.stepped_runs import finish, first_turn

TWO_ROUNDS = [
    Reply(text="Checking.", tool_calls=[("calculator", {"expression": "6*7"}), ("echo", {"text": "a"})]),
    Reply(text="The answer is 42."),
]


@pytest.fixture(params=["redis", "memory"])
def event_log(request, settings):
    # Through pytest-django's ``settings`` (not a nested override_settings):
    # both restore on teardown, and interleaved they left the last test's
    # backend set for every test after it.
    settings.CHATFORGE_EVENT_LOG = request.param
    reset_event_log()
    yield get_event_log()
    reset_event_log()


@pytest.fixture
def engine(settings, fake_llm, idle_broker, make_user, event_log):
    settings.OPENAI_BASE_URL = fake_llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    fake_llm.add_script("rt-two-rounds", TWO_ROUNDS)
    user, _ = make_user()
    return user


def start(user) -> Run:
    return stepped_runs.start(user, model="rt-two-rounds")



def collect(run_id: str, *, after: int = 0, block_ms: int = 200, limit: int | None = None) -> list[dict]:
    async def gather() -> list[dict]:
        found = []
        async for event in follow_run(run_id, after=after, block_ms=block_ms):
            found.append(event)
            if limit is not None and len(found) >= limit:
                break
        # The executor thread's database connection would outlive the test database.
        await sync_to_async(connections.close_all)()
        return found

    return asyncio.run(gather())


@pytest.fixture
def finished_run(engine) -> Iterator[Run]:
    run = start(engine)
    finish(run, first_turn(run))
    run.refresh_from_db()
    assert run.status == "completed"
    yield run
