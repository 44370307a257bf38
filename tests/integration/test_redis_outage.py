"""Redis killed and started again empty, or flushed, in the middle of runs.

The whole stack (web, LLM worker on gevent, tools worker on prefork, beat)
runs against a private ``redis-server`` (broker, event log, throttle) and
the test database. Runs are started so that, at the moment Redis goes, model
turns are streaming, tool calls are running and further tool calls wait in
the ``tools`` queue; every run is followed by a client over a websocket
(and over SSE when Redis is flushed), resuming with ``after=<last seq>``
whenever its stream ends early, as a real client does.

Then either the server is killed with SIGKILL and started again on the same
port with nothing in it (queued and unacknowledged messages, event logs and
kombu's bindings all gone, every connection cut), or ``FLUSHDB`` empties it
under open connections. Afterwards:

- the same worker, web and beat processes are still running (nothing was
  restarted) and a new run with a tool call completes through both workers;
- every run completed exactly once: one assistant message, every tool call
  a success (a tool running when Redis went was not cut short), each side
  effect once, and for each client one terminal event, last, after seqs
  that only rise (a lost log is replaced by a ``snapshot``, decision 0006);
- no worker logged an ``AttributeError`` from kombu's channels closed by the
  connection loss, and beat, which failed to send while Redis was away,
  sends again (decision 0011).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from chatforge.conversations.models import Message, Run, ToolInvocation
from orchestration.event_log.events import TERMINAL_TYPES
from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient, follow_run, run_socket_url
from tests.support.private_services import PrivateRedis, private_redis
from tests.support.side_by_side import stop_together
from tests.support.stack import DistributedStack, distributed_stack, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

LONG_ANSWER = " ".join(f"word{i}" for i in range(100))  # about 5 s at 0.05 s a chunk
OUTAGE_S = 3  # at least; and until beat has failed to send a sweep
BEAT_SEND_FAILED = "Couldn't apply scheduled task sweep-stalled-runs"
RUNS_PER_KIND = 3
TERMINAL = (Run.Status.COMPLETED, Run.Status.FAILED, Run.Status.CANCELLED)


@dataclass
class Follower:
    """One client following one run to its end, over a websocket or SSE,
    reconnecting with ``after=<last seq>`` when the stream ends without a
    terminal event (a 1013 close during the outage, a refused handshake).
    Events are kept as they arrive."""

    run_id: str
    read: Callable[[int | None, list[dict[str, Any]]], None]  # appends until the stream ends
    events: list[dict[str, Any]] = field(default_factory=list)
    reconnects: int = 0
    error: BaseException | None = None
    thread: threading.Thread | None = None

    def _follow(self) -> None:
        deadline = time.monotonic() + 90
        try:
            while time.monotonic() < deadline:
                after = self.events[-1]["seq"] if self.events else None
                try:
                    self.read(after, self.events)
                except (InvalidStatus, ConnectionClosed, OSError, httpx.HTTPError):
                    pass  # refused or cut while Redis was away: try again
                if self.events and self.events[-1]["type"] in TERMINAL_TYPES:
                    return
                self.reconnects += 1
                time.sleep(0.5)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def start(self) -> Follower:
        self.thread = threading.Thread(target=self._follow, name=f"follow-{self.run_id}", daemon=True)
        self.thread.start()
        return self

    def join(self) -> None:
        assert self.thread is not None
        self.thread.join(30)  # called once every run has ended
        assert not self.thread.is_alive(), f"the client of run {self.run_id} never saw its end"
        assert self.error is None, self.error

    def saw(self, type_: str) -> bool:
        return any(event["type"] == type_ for event in list(self.events))


def _websocket(stack: DistributedStack, token: str, run_id: str) -> Follower:
    def read(after: int | None, sink: list[dict[str, Any]]) -> None:
        with connect(run_socket_url(stack.ws_url, run_id, after), open_timeout=10,
                     additional_headers={"Authorization": f"Bearer {token}"}) as ws:
            for message in ws:
                sink.append(json.loads(message))

    return Follower(run_id, read)


def _sse(stack: DistributedStack, token: str, run_id: str) -> Follower:
    def read(after: int | None, sink: list[dict[str, Any]]) -> None:
        params = {"after": after} if after is not None else None
        with httpx.stream("GET", f"{stack.http_url}/api/runs/{run_id}/events/", params=params, timeout=60,
                          headers={"Authorization": f"Bearer {token}"}) as response:
            if response.status_code != 200:
                return  # 503 while Redis is away: try again
            for line in response.iter_lines():
                if line.startswith("data: "):
                    sink.append(json.loads(line[len("data: "):]))

    return Follower(run_id, read)


@contextmanager
def _outage_stack(redis_server: PrivateRedis, effects: PrivateRedis, fake_llm, django_db_blocker) -> Iterator[DistributedStack]:
    from tests.conftest import _test_database_url

    with django_db_blocker.unblock():
        database_url = _test_database_url()
    extra_env = {
        "OPENAI_BASE_URL": fake_llm.base_url, "OPENAI_API_KEY": "test-key",
        "CHATFORGE_TOOL_MODULES": "tests.support.tools", "CHATFORGE_TEST_EFFECTS_REDIS_URL": effects.url(0),
        "CHATFORGE_MESSAGE_RATE": "", "CHATFORGE_MAX_ACTIVE_RUNS_PER_USER": "20",
        # Leases far longer than the test: no step is taken over because its
        # lease expired, so what was lost can only come back through the
        # sweeper noticing the emptied broker (orchestration/queueing/broker_loss.py).
        "CHATFORGE_RUN_STALL_S": "600", "CHATFORGE_SWEEP_INTERVAL_S": "1",
    }
    with distributed_stack(database_url=database_url, redis_url=redis_server.url(0), extra_env=extra_env,
                           llm_concurrency=20, tool_concurrency=2, with_beat=True) as stack:
        yield stack
        stop_together(reversed(stack.processes))


def _scripts(fake_llm, prefix: str) -> tuple[str, str]:
    plain, tools = f"{prefix}-plain", f"{prefix}-tools"
    fake_llm.add_script(plain, [Reply(text=LONG_ANSWER, chunk_delay_s=0.05)])
    fake_llm.add_script(tools, [
        Reply(text="Working on it.",
              tool_calls=[("slow_effect", {"ms": 3000}), ("slow_sleep", {"ms": 2500}), ("count_effect", {}),
                          ("wait_io", {"ms": 2500})]),  # the I/O pool's threads worker, in flight too
        Reply(text=LONG_ANSWER, chunk_delay_s=0.02),
    ])
    return plain, tools


def _start_runs(api: ApiClient, plain: str, tools: str) -> list[str]:
    models = [plain, tools] * RUNS_PER_KIND
    return [api.post_message(api.new_conversation(), "go", model=model)["run_id"] for model in models]


def _flight(run_ids: list[str], followers: list[Follower]) -> tuple[set[str], set[tuple[str, str]], int]:
    statuses = set(Run.objects.filter(pk__in=run_ids).values_list("status", flat=True))
    calls = set(ToolInvocation.objects.filter(run_id__in=run_ids).values_list("name", "status"))
    streaming = sum(f.saw("content.delta") for f in followers if not f.saw("tool_call"))
    return statuses, calls, streaming


def _wait_mid_flight(run_ids: list[str], followers: list[Follower]) -> None:
    """Until turns are streaming, a side-effecting tool is running and tool
    calls wait in the queue."""
    def ready() -> bool:
        statuses, calls, streaming = _flight(run_ids, followers)
        waiting = any(status == "pending" for _, status in calls)
        return (statuses == {Run.Status.RUNNING} and ("slow_effect", "running") in calls and waiting
                and streaming > 0)

    try:
        wait_for(ready, timeout=30, what="turns, tools and queued tools in flight")
    except TimeoutError as exc:
        raise AssertionError(_flight(run_ids, followers)) from exc


def _wait_terminal(run_ids: list[str]) -> None:
    wait_for(lambda: not Run.objects.filter(pk__in=run_ids).exclude(status__in=TERMINAL).exists(),
             timeout=60, what="every run to end")


def _assert_completed_once(run_ids: list[str], followers: list[Follower], effects: PrivateRedis,
                           stack: DistributedStack) -> None:
    runs = {str(run.pk): run for run in Run.objects.filter(pk__in=run_ids)}
    assert {run.status for run in runs.values()} == {Run.Status.COMPLETED}, (
        {k: (r.status, r.error) for k, r in runs.items()}, stack.logs())
    for run_id in run_ids:
        assert Message.objects.filter(run_id=run_id, role="assistant").count() == 1
    # Tools running when Redis went were not cut short: every call succeeded,
    # and each side effect happened once.
    calls = list(ToolInvocation.objects.filter(run_id__in=run_ids).values_list("name", "status", "error"))
    assert all(status == "success" for _, status, _ in calls), calls
    counts = [int(effects.client().get(key)) for key in effects.client().keys("effect:*")]
    assert counts == [1] * (2 * RUNS_PER_KIND), counts
    for follower in followers:
        follower.join()
        seqs = [event["seq"] for event in follower.events]
        assert seqs == sorted(set(seqs)), (follower.run_id, seqs)  # only rising: no seq twice
        types = [event["type"] for event in follower.events]
        assert sum(t in TERMINAL_TYPES for t in types) == 1 and types[-1] == "run.completed", types


def _assert_nothing_restarted(stack: DistributedStack, pids: dict[str, int], api: ApiClient, token: str,
                              tools_model: str) -> None:
    assert {proc.name: proc.popen.pid for proc in stack.processes} == pids
    assert all(proc.popen.poll() is None for proc in stack.processes), stack.logs()
    for name in ("llm", "tools", "tools-io"):
        log = stack.process(name).log()
        assert "AttributeError" not in log and "Unrecoverable error" not in log, log[-6000:]
    # A new run goes through every worker (a turn, four tool calls, a turn).
    fresh = api.post_message(api.new_conversation(), "again", model=tools_model)["run_id"]
    events = follow_run(stack.ws_url, fresh, token, timeout=60)
    assert events[-1]["type"] == "run.completed", stack.logs()
    assert [e["type"] for e in events].count("tool_output") == 4


def test_redis_killed_and_started_empty_mid_run(fake_llm, make_user, django_db_blocker):
    plain, tools = _scripts(fake_llm, "redis-kill")
    _, token = make_user()
    with private_redis() as redis_server, private_redis() as effects, \
            _outage_stack(redis_server, effects, fake_llm, django_db_blocker) as stack:
        pids = {proc.name: proc.popen.pid for proc in stack.processes}
        beat = stack.process("beat")
        wait_for(lambda: "Sending due task" in beat.log(), timeout=30, what="beat's first sweep", process=beat)
        api = ApiClient(stack.http_url, token)
        run_ids = _start_runs(api, plain, tools)
        followers = [_websocket(stack, token, run_id).start() for run_id in run_ids]
        _wait_mid_flight(run_ids, followers)

        redis_server.kill()
        killed = time.monotonic()
        # Redis stays away until beat has failed to send a sweep: afterwards
        # only beat's sweeps can send the lost steps again.
        wait_for(lambda: BEAT_SEND_FAILED in beat.log(), timeout=30, what="beat to fail a send", process=beat)
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - killed)))
        redis_server.start()  # same port, empty

        _wait_terminal(run_ids)
        _assert_completed_once(run_ids, followers, effects, stack)
        _assert_nothing_restarted(stack, pids, api, token, tools)


def test_redis_flushed_mid_run(fake_llm, make_user, django_db_blocker):
    plain, tools = _scripts(fake_llm, "redis-flush")
    _, token = make_user()
    with private_redis() as redis_server, private_redis() as effects, \
            _outage_stack(redis_server, effects, fake_llm, django_db_blocker) as stack:
        pids = {proc.name: proc.popen.pid for proc in stack.processes}
        api = ApiClient(stack.http_url, token)
        run_ids = _start_runs(api, plain, tools)
        sockets = [_websocket(stack, token, run_id).start() for run_id in run_ids]
        streams = [_sse(stack, token, run_id).start() for run_id in run_ids]
        _wait_mid_flight(run_ids, sockets)

        broker = redis_server.client(0)
        assert broker.keys("_kombu.binding.*")
        broker.flushdb()

        _wait_terminal(run_ids)
        _assert_completed_once(run_ids, sockets + streams, effects, stack)
        # Every client of a run whose log vanished under it got a snapshot
        # from Postgres in its place (decision 0006).
        assert all(follower.saw("snapshot") for follower in sockets + streams), [
            (f.run_id, [e["type"] for e in f.events]) for f in sockets + streams if not f.saw("snapshot")]
        _assert_nothing_restarted(stack, pids, api, token, tools)
        # Kombu's binding tables went with the flush and nothing declared them
        # again, yet every step was delivered: sends go straight to the queues.
        assert not broker.keys("_kombu.binding.llm") and not broker.keys("_kombu.binding.tools")

