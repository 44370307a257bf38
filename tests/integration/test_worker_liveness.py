"""A lost worker is noticed in seconds with the default settings, and a
slow one is never taken for lost (docs/outages.md, "A worker process
dies").

The stack runs with the shipped defaults for leases, sweeps and liveness
(no ``FAST_RECOVERY_ENV``): a tools worker SIGKILLed in the middle of a
call is declared lost once its liveness entry lapses, its call's lease is
released and the call goes to a second tools worker at once, not after the
one-minute lease; the run's clients hear ``run.reconnecting`` in between.
Beside it, a 25 s tool on the I/O pool and a model turn streaming for 25 s
run once each: their workers are alive, only slow.

The time from the kill to the new delivery is printed (and recorded in
docs/outages.md); the test asserts the order of what happened, not how
fast.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.conf import settings

from chatforge.conversations.models import LlmTurn, Message, Run, ToolInvocation
from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient, follow_run
from tests.support.stack import private_stack, start_worker, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

LIVENESS_REDIS_URL = settings.REDIS_URL.rsplit("/", 1)[0] + "/1"  # free: tests/settings.py lists who has which
SLOW_S = 25
LONG_ANSWER = " ".join(f"word{i}" for i in range(100))  # 100 chunks at 0.25 s: 25 s of streaming


@pytest.fixture
def liveness_stack(django_db_blocker, fake_llm):
    from tests.conftest import _test_database_url

    with django_db_blocker.unblock():
        database_url = _test_database_url()
    with private_stack(database_url=database_url, redis_url=LIVENESS_REDIS_URL, llm_base_url=fake_llm.base_url,
                       fast_recovery=False) as stack:
        # The second tools worker, up before the kill: the time measured is
        # the noticing and the re-drive, not a worker's start-up.
        stack.processes.append(start_worker("tools-2", queues="tools", pool="prefork", concurrency=2,
                                            env=stack.env, log_dir=stack.log_dir))
        yield stack


class Following:
    """A run's events over a websocket, collected in a thread until it ends."""

    def __init__(self, ws_url: str, run_id: str, token: str) -> None:
        self.events: list[dict[str, Any]] = []
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._follow, args=(ws_url, run_id, token), daemon=True)
        self._thread.start()

    def _follow(self, ws_url: str, run_id: str, token: str) -> None:
        try:
            self.events = follow_run(ws_url, run_id, token, timeout=120)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def join(self) -> list[dict[str, Any]]:
        self._thread.join(150)
        assert not self._thread.is_alive(), "the run's socket never closed"
        assert self.error is None, self.error
        return self.events


def _check_seqs(events: list[dict[str, Any]]) -> None:
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["type"] == "run.completed", [e["type"] for e in events]


def test_a_killed_worker_is_noticed_in_seconds_and_a_slow_one_never(liveness_stack, fake_llm, make_user):
    stack = liveness_stack
    fake_llm.add_script("liveness-killed", [Reply(text="Working.", tool_calls=[("slow_sleep", {"ms": 4000})]),
                                            Reply(text="Done after the loss.")])
    fake_llm.add_script("liveness-slow-tool", [Reply(text="Waiting.", tool_calls=[("wait_io", {"ms": SLOW_S * 1000})]),
                                               Reply(text="Done after the wait.")])
    fake_llm.add_script("liveness-long-turn", [Reply(text=LONG_ANSWER, chunk_delay_s=SLOW_S / 100)])
    _, token = make_user()
    api = ApiClient(stack.http_url, token)

    slow_tool = api.post_message(api.new_conversation(), "wait", model="liveness-slow-tool")["run_id"]
    long_turn = api.post_message(api.new_conversation(), "talk", model="liveness-long-turn")["run_id"]
    killed = api.post_message(api.new_conversation(), "work", model="liveness-killed")["run_id"]
    followers = {run_id: Following(stack.ws_url, run_id, token) for run_id in (slow_tool, long_turn, killed)}

    wait_for(lambda: ToolInvocation.objects.filter(run_id=killed, status="running").exists(),
             timeout=60, what="the call to kill to start")
    first = ToolInvocation.objects.get(run_id=killed)
    victim = first.worker.partition("@")[0]  # "tools" or "tools-2": whichever took it
    survivor = "tools-2" if victim == "tools" else "tools"
    stack.process(victim).kill()
    killed_at = time.monotonic()
    wait_for(lambda: ToolInvocation.objects.filter(run_id=killed, deliveries=2).exists(),
             timeout=90, what="the killed call's second delivery", process=stack.process(survivor))
    recovered_s = time.monotonic() - killed_at
    print(f"a SIGKILLed tools worker's call was delivered again {recovered_s:.1f} s after the kill "
          f"(defaults: liveness every {settings.CHATFORGE_LIVENESS_S:g} s, "
          f"lost after {settings.CHATFORGE_WORKER_LOST_S:g} s; lease {settings.CHATFORGE_RUN_STALL_S:g} s)")

    events = {run_id: follower.join() for run_id, follower in followers.items()}
    for run_id, run_events in events.items():
        _check_seqs(run_events)
        assert Run.objects.get(pk=run_id).status == "completed", stack.logs()

    # The killed call: noticed, announced, run again once on the survivor.
    types = [e["type"] for e in events[killed]]
    assert types.count("tool_output") == 1 and types.count("run.reconnecting") == 1, types
    assert types.index("tool_call") < types.index("run.reconnecting") < types.index("tool_output"), types
    (notice,) = [e for e in events[killed] if e["type"] == "run.reconnecting"]
    assert notice["data"]["step"] == "tool_call" and notice["data"]["tool_call_id"] == first.tool_call_id
    again = ToolInvocation.objects.get(run_id=killed)
    assert again.status == "success" and again.deliveries == 2 and again.worker.startswith(f"{survivor}@")
    assert Message.objects.get(run_id=killed, role="assistant").content == "Done after the loss."

    # The slow ones: one delivery each, never announced as reconnecting.
    assert ToolInvocation.objects.get(run_id=slow_tool).deliveries == 1
    assert list(LlmTurn.objects.filter(run_id=long_turn).values_list("deliveries", flat=True)) == [1]
    for run_id in (slow_tool, long_turn):
        assert "run.reconnecting" not in [e["type"] for e in events[run_id]]
    assert Message.objects.get(run_id=long_turn, role="assistant").content == LONG_ANSWER
