"""Scale-out across hosts: runs spread over two worker hosts, and one host
partitioned away or cut off mid-run loses nothing, with the shipped
defaults.

The system runs on hosts made with network namespaces (tests/support/netns.py),
each with its own address on one private subnet: ``db`` (a private Postgres
cluster and a private redis-server), ``web`` (the ASGI server and celery
beat, whose sweeper re-drives stalled steps) and two worker hosts ``w1`` and
``w2``, each running an LLM worker (``llm,default``, gevent) and a tools
worker (``tools``, prefork) named after its host (``llm@w1``, ``tools@w1``).
The test process sits on the same subnet as a client host: it migrates the
database, serves the fake LLM the workers call, and talks to the web host.

Runs whose model asks for two tools and then streams a slow answer are
started together. Every step records the Celery node that ran it
(``LlmTurn.worker``, ``ToolInvocation.worker``), which shows both worker
hosts taking part. While runs are in flight:

1. ``w1`` is partitioned away for 20 s (the switch's end of its link goes
   down; its processes keep running) and then put back. Its processes stop
   renewing their liveness, are declared lost within seconds, and what they
   were running is delivered again on ``w2``; back on the network they learn
   they were given away, and stop without recording or streaming anything.
2. ``w1``, back under new names, takes steps again, and is then cut off for
   good: its link is brought down (its peers see silence, not closed
   connections) and every process on it is killed.

Both times every run completes, once: one assistant message, one turn per
iteration, one invocation per call, each side effect at most once, every
client's events numbered 1, 2, 3… without gaps or repeats, the streamed
answer exactly the answer. The time from the partition or the cut to the
new deliveries is printed (docs/outages.md records it).

Where namespaces cannot be made (not root), the same scenario runs with every
host on 127.0.0.1: the partition freezes ``w1``'s processes (SIGSTOP, then
SIGCONT) and the cut is only their killing; the test says so. With
``CI=true`` that fallback fails the test instead: CI must run the namespace
version. ``CHATFORGE_TEST_NETNS=off`` forces the fallback (to check it on a
machine that has namespaces).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis

from orchestration.event_log.events import TERMINAL_TYPES
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.support.client import ApiClient
from tests.support.db_observer import stack_database
from tests.support.netns import LoopbackNetwork, VirtualNetwork, namespaces_available, virtual_network
from tests.support.private_services import PrivatePostgres, PrivateRedis
from tests.support.stack import (
    TEST_SECRET_KEYS,
    Process,
    base_env,
    free_port,
    start_beat,
    start_server,
    start_worker,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

Network = VirtualNetwork | LoopbackNetwork

HOSTS = ("db", "web", "w1", "w2")
WORKER_HOSTS = ("w1", "w2")
CUT, SURVIVOR = "w1", "w2"
RUNS = 16
MODEL = "multihost-tools-then-answer"
ANSWER = " ".join(f"word{i}" for i in range(40))  # about 2 s at 0.05 s a chunk
SCRIPT = [
    # Two calls per run: one that takes a while (idempotent, so a taken-over
    # call runs again) and one side effect that must never happen twice.
    Reply(text="Looking into it. ", tool_calls=[("slow_sleep", {"ms": 1500}), ("count_effect", {})]),
    Reply(text=ANSWER, chunk_delay_s=0.05),
]
TERMINAL = ("completed", "failed", "cancelled")
# The fleet runs with the shipped defaults for liveness, leases and sweeps
# (no FAST_RECOVERY_ENV), and for the database sessions: a host cut off in
# the middle of a transaction never sends its COMMIT, and its session would
# hold its row locks until idle_in_transaction_session_timeout (60 s); the
# process that declares the host's processes lost ends their sessions
# (orchestration/services/lost_workers.py).
FORCE_LOOPBACK = "CHATFORGE_TEST_NETNS"  # "off": the loopback fallback even where namespaces work


# -- the network -------------------------------------------------------------


def _namespaces() -> tuple[bool, str]:
    if os.environ.get(FORCE_LOOPBACK, "").lower() == "off":
        return False, f"{FORCE_LOOPBACK}=off"
    return namespaces_available()


@pytest.fixture
def network() -> Iterator[Network]:
    """The hosts: namespaces on a private subnet, or loopback when namespaces
    cannot be made here (never on CI, where that is a failure)."""
    available, reason = _namespaces()
    if available:
        with virtual_network(HOSTS) as made:
            yield made
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"network namespaces unavailable: {reason}; CI must run the namespace version of this "
                    "test (as root, or with CAP_SYS_ADMIN and CAP_NET_ADMIN)")
    message = f"network namespaces unavailable: {reason}; running the same scenario on loopback"
    print(message)
    warnings.warn(message, stacklevel=1)
    yield LoopbackNetwork(HOSTS)


# -- the fleet ---------------------------------------------------------------


@dataclass
class Fleet:
    network: Network
    pg: PrivatePostgres
    effects: redis.Redis
    llm: FakeOpenAIServer
    api: ApiClient
    processes: dict[str, Process] = field(default_factory=dict)  # by Celery node name, or "web" / "beat"

    def on(self, host: str) -> list[Process]:
        return [proc for node, proc in self.processes.items() if node.endswith(f"@{host}")]

    def logs(self) -> str:
        return "\n".join(f"===== {node}\n{proc.log()[-2500:]}" for node, proc in self.processes.items())

    def liveness_log(self) -> str:
        """What the fleet's processes said about lost workers (who noticed, when)."""
        words = ("declared lost", "sent on", "ended ", "given to another delivery")
        return "\n".join(f"{node}: {line}" for node, proc in self.processes.items()
                         for line in proc.log().splitlines() if any(word in line for word in words))


def _env(network: Network, database_url: str, redis_server: PrivateRedis, llm: FakeOpenAIServer) -> dict[str, str]:
    return base_env(
        DATABASE_URL=database_url,
        REDIS_URL=redis_server.url(0),
        DJANGO_SECRET_KEY="multihost-tests-secret-key-0123456789-abcdefgh",
        DJANGO_ALLOWED_HOSTS=f"{network.host('web').address},127.0.0.1,localhost",
        CHATFORGE_SECRET_KEYS=TEST_SECRET_KEYS,
        CHATFORGE_LOG_LEVEL="INFO",
        OPENAI_BASE_URL=llm.base_url,
        OPENAI_API_KEY="test-key",
        CHATFORGE_TOOL_MODULES="tests.support.tools",
        CHATFORGE_TEST_EFFECTS_REDIS_URL=redis_server.url(3),
        CHATFORGE_MESSAGE_RATE="",
        CHATFORGE_MAX_ACTIVE_RUNS_PER_USER=str(RUNS * 2),
        # Each process (and each prefork child) has a pool of its own: keep
        # the fleet well under the cluster's max_connections.
        DATABASE_POOL_MAX_SIZE="5",
    )


def _starters(network: Network, env: dict[str, str], log_dir: Path, port: int) -> dict[str, Callable[[], Process]]:
    """How to start each process of the fleet, on its host."""
    web = network.host("web")
    starters: dict[str, Callable[[], Process]] = {
        "web": partial(start_server, port=port, env=env, log_dir=log_dir, name="web", host=web.address,
                       prefix=web.prefix()),
        "beat": partial(start_beat, env=env, log_dir=log_dir, prefix=web.prefix()),
    }
    for name in WORKER_HOSTS:
        host = network.host(name)
        starters[f"llm@{name}"] = partial(start_worker, f"llm-{name}", queues="llm,default", pool="gevent",
                                          concurrency=20, env=env, log_dir=log_dir, node=f"llm@{name}",
                                          prefix=host.prefix())
        starters[f"tools@{name}"] = partial(start_worker, f"tools-{name}", queues="tools", pool="prefork",
                                            concurrency=2, env=env, log_dir=log_dir, node=f"tools@{name}",
                                            prefix=host.prefix())
    return starters


def _start_all(starters: dict[str, Callable[[], Process]], started: dict[str, Process]) -> None:
    """Start every process at once (each waits until it is ready); whatever
    started is in ``started`` even when another failed, so it is stopped."""
    with ThreadPoolExecutor(len(starters)) as pool:
        futures = {node: pool.submit(start) for node, start in starters.items()}
    errors = []
    for node, future in futures.items():
        try:
            started[node] = future.result()
        except Exception as exc:  # noqa: BLE001 - re-raised below, after the others are kept
            errors.append(exc)
    if errors:
        raise errors[0]


def _stop_all(processes: dict[str, Process]) -> None:
    with ThreadPoolExecutor(max(1, len(processes))) as pool:
        list(pool.map(lambda proc: proc.stop(), processes.values()))


@pytest.fixture
def fleet(network: Network) -> Iterator[Fleet]:
    """The whole system on the network's hosts; torn down before the network."""
    with ExitStack() as cleanup:
        log_dir = Path(tempfile.mkdtemp(prefix="chatforge-multihost-"))
        cleanup.callback(shutil.rmtree, log_dir, ignore_errors=True)
        llm = FakeOpenAIServer(host=network.client_address).start()
        cleanup.callback(llm.stop)
        db = network.host("db")
        pg = PrivatePostgres(host=db.address, trust_network=network.trust_network, command_prefix=db.prefix())
        cleanup.callback(pg.destroy)
        pg.init()
        pg.start()
        redis_server = PrivateRedis(host=db.address, command_prefix=db.prefix())
        cleanup.callback(redis_server.stop)
        redis_server.start()
        database_url, token = stack_database(pg, role="chatforge", connection_limit=None, redis_url=redis_server.url(0))
        env = _env(network, database_url, redis_server, llm)
        port = free_port()
        running = Fleet(network=network, pg=pg, effects=redis_server.client(3), llm=llm,
                        api=ApiClient(f"http://{network.host('web').address}:{port}", token))
        cleanup.callback(_stop_all, running.processes)
        _start_all(_starters(network, env, log_dir, port), running.processes)
        yield running


# -- reading what happened ---------------------------------------------------

STEPS_SQL = """
    SELECT 'turn', id, run_id::text, worker, status, deliveries, finished_at
      FROM conversations_llmturn WHERE run_id::text = ANY(%(runs)s)
    UNION ALL
    SELECT 'tool', id, run_id::text, worker, status, deliveries, finished_at
      FROM conversations_toolinvocation WHERE run_id::text = ANY(%(runs)s)
"""


@dataclass(frozen=True)
class Step:
    kind: str  # "turn" or "tool"
    id: int
    run_id: str
    worker: str  # Celery node of the latest delivery, e.g. "llm@w2"
    status: str
    deliveries: int
    finished_at: datetime | None

    @property
    def host(self) -> str:
        return self.worker.rpartition("@")[2]


def _query(pg: PrivatePostgres, sql: str, params: dict[str, Any] | None = None) -> list[tuple]:
    with psycopg.connect(pg.url("chatforge"), autocommit=True, connect_timeout=5) as conn:
        return conn.execute(sql, params or {}).fetchall()


def _steps(pg: PrivatePostgres, run_ids: list[str]) -> list[Step]:
    return [Step(*row) for row in _query(pg, STEPS_SQL, {"runs": run_ids})]


def _by_host(steps: list[Step]) -> dict[str, int]:
    """Steps per worker host (by the node of their latest delivery)."""
    return dict(sorted(Counter(step.host for step in steps if step.worker).items()))


# Steps on the host to cut that have just started and have a second or more
# of work left (a 1.5 s tool call, a 2 s answer), so the cut is sure to catch
# them running.
FRESH_SQL = """
    SELECT count(*) FROM (
        SELECT 1 FROM conversations_toolinvocation
         WHERE run_id::text = ANY(%(runs)s) AND worker LIKE %(node)s AND status = 'running'
           AND name = 'slow_sleep' AND started_at > clock_timestamp() - interval '0.9 seconds'
        UNION ALL
        SELECT 1 FROM conversations_llmturn
         WHERE run_id::text = ANY(%(runs)s) AND worker LIKE %(node)s AND status = 'running'
           AND iteration = 1 AND started_at > clock_timestamp() - interval '1.2 seconds'
    ) AS fresh
"""


def _ready_to_cut(pg: PrivatePostgres, run_ids: list[str]) -> bool:
    """Both worker hosts have run steps, and the host to cut has just
    started one that will still be running when it is cut off."""
    hosts = {step.host for step in _steps(pg, run_ids) if step.worker}
    return set(WORKER_HOSTS) <= hosts and _query(pg, FRESH_SQL, {"runs": run_ids, "node": f"%@{CUT}"})[0][0] > 0


def _show(steps: list[Step]) -> str:
    return "; ".join(f"{s.kind} {s.id} of run {s.run_id[:8]} on {s.worker or '-'} {s.status} "
                     f"deliveries={s.deliveries}" for s in steps)


def _db_now(pg: PrivatePostgres) -> datetime:
    return _query(pg, "SELECT clock_timestamp()")[0][0]


def _run(api: ApiClient, run_id: str) -> dict[str, Any]:
    response = api.request("GET", f"/api/runs/{run_id}/")
    assert response.status_code == 200, response.text
    return response.json()


def _status(api: ApiClient, run_id: str) -> str:
    return _run(api, run_id)["status"]


def _all_ended(api: ApiClient, run_ids: list[str]) -> bool:
    return all(_status(api, run_id) in TERMINAL for run_id in run_ids)


def _wait_until_ended(fleet: Fleet, run_ids: list[str], timeout: float) -> None:
    """Poll the runs through the web host; on timeout say what is stuck:
    unfinished runs, steps by host, sessions holding or waiting for locks."""
    try:
        wait_for(lambda: _all_ended(fleet.api, run_ids), timeout=timeout, what=f"{len(run_ids)} runs to end")
    except TimeoutError as exc:
        open_runs = [run_id for run_id in run_ids if _status(fleet.api, run_id) not in TERMINAL]
        sessions = _query(fleet.pg, """
            SELECT client_addr::text, state, wait_event_type, left(query, 80) FROM pg_stat_activity
             WHERE datname = 'chatforge' AND (state = 'idle in transaction' OR wait_event_type = 'Lock')""")
        raise TimeoutError(f"{exc}\nnot ended: {open_runs}\nsteps by host: {_by_host(_steps(fleet.pg, run_ids))}"
                           f"\nsessions in a transaction or waiting for a lock: {sessions}\n{fleet.logs()}") from exc


def _transcript(api: ApiClient, conversation_id: str) -> list[dict[str, Any]]:
    response = api.request("GET", f"/api/conversations/{conversation_id}/messages/")
    assert response.status_code == 200, response.text
    body = response.json()
    return body["results"] if isinstance(body, dict) else body


@dataclass
class Follower:
    """A client following one run over SSE on the web host, resuming with
    ``Last-Event-ID`` whenever a stream ends before the terminal event."""

    url: str
    token: str
    events: list[dict[str, Any]] = field(default_factory=list)
    error: BaseException | None = None
    thread: threading.Thread | None = None

    def _read_once(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        if self.events:
            headers["Last-Event-ID"] = str(self.events[-1]["seq"])
        with httpx.stream("GET", self.url, headers=headers, timeout=httpx.Timeout(10, read=30)) as response:
            if response.status_code != 200:
                return
            for line in response.iter_lines():
                if line.startswith("data:"):
                    self.events.append(json.loads(line[len("data:"):]))

    def _follow(self) -> None:
        deadline = time.monotonic() + 100
        try:
            while time.monotonic() < deadline:
                try:
                    self._read_once()
                except httpx.HTTPError:
                    pass  # cut: resume from the last seq
                if self.events and self.events[-1]["type"] in TERMINAL_TYPES:
                    return
                time.sleep(0.2)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def start(self) -> Follower:
        self.thread = threading.Thread(target=self._follow, name="sse-follower", daemon=True)
        self.thread.start()
        return self

    def join(self, timeout: float = 30) -> list[dict[str, Any]]:
        assert self.thread is not None
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"{self.url}: the client never saw the run end"
        assert self.error is None, self.error
        return self.events


def _start_run(fleet: Fleet, content: str) -> tuple[str, str, Follower]:
    """Start a run in a new conversation and follow it: (conversation, run, follower)."""
    conversation_id = fleet.api.new_conversation()
    run_id = fleet.api.post_message(conversation_id, content, model=MODEL)["run_id"]
    follower = Follower(f"{fleet.api.base_url}/api/runs/{run_id}/events/", fleet.api.token).start()
    return conversation_id, run_id, follower


def _cut_off(fleet: Fleet, host: str) -> str:
    """Bring the host's link down, then SIGKILL its processes (their process
    groups, then anything else left in its namespace). How it was cut."""
    linked_down = fleet.network.cut(host)
    for proc in fleet.on(host):
        proc.kill()
    fleet.network.kill_processes(host)
    assert not fleet.network.processes(host), f"processes left on {host}"
    assert all(proc.popen.poll() is not None for proc in fleet.on(host))
    return "link down, processes killed" if linked_down else "processes killed (loopback: no link to cut)"


# -- checks ------------------------------------------------------------------


def _check_events(run_id: str, events: list[dict[str, Any]]) -> None:
    """Numbered 1, 2, 3… (no gap, no repeat), one terminal event, last, a
    completion; one output per tool call."""
    seqs = [event["seq"] for event in events]
    assert seqs == list(range(1, len(events) + 1)), (run_id, seqs)
    types = [event["type"] for event in events]
    assert sum(kind in TERMINAL_TYPES for kind in types) == 1 and types[-1] == "run.completed", (run_id, types)
    outputs = Counter(e["data"]["tool_call_id"] for e in events if e["type"] == "tool_output")
    calls = {e["data"]["id"] for e in events if e["type"] == "tool_call"}
    assert len(calls) == 2 and set(outputs) == calls and set(outputs.values()) == {1}, (run_id, types)


def _check_transcript(fleet: Fleet, conversation_id: str, run_id: str) -> None:
    """One user message, one assistant answer (the final turn's text), one
    tool round with each call answered exactly once."""
    messages = _transcript(fleet.api, conversation_id)
    assert [m["role"] for m in messages] == ["user", "assistant"], (run_id, messages)
    answer = messages[1]
    assert answer["content"] == ANSWER and str(answer["run"]) == run_id, (run_id, answer)
    (round_,) = answer["tool_rounds"]
    call_ids = [call["id"] for call in round_["tool_calls"]]
    result_ids = [result["tool_call_id"] for result in round_["results"]]
    assert len(call_ids) == 2 and sorted(result_ids) == sorted(call_ids) == sorted(set(call_ids)), (run_id, round_)


def _check_ledger(fleet: Fleet, run_ids: list[str]) -> None:
    """Per run: turns for iterations 0 and 1, two invocations, one assistant
    message; each side effect done at most once, and once when it succeeded."""
    rows = _query(fleet.pg, """
        SELECT r.id::text,
               (SELECT array_agg(t.iteration ORDER BY t.iteration) FROM conversations_llmturn t WHERE t.run_id = r.id),
               (SELECT count(*) FROM conversations_toolinvocation i WHERE i.run_id = r.id),
               (SELECT count(*) FROM conversations_message m WHERE m.run_id = r.id AND m.role = 'assistant')
          FROM conversations_run r WHERE r.id::text = ANY(%(runs)s)""", {"runs": run_ids})
    assert len(rows) == len(run_ids)
    for run_id, iterations, invocations, answers in rows:
        assert (iterations, invocations, answers) == ([0, 1], 2, 1), run_id
    effects = _query(fleet.pg, """
        SELECT run_id::text || ':' || tool_call_id, status FROM conversations_toolinvocation
         WHERE name = 'count_effect' AND run_id::text = ANY(%(runs)s)""", {"runs": run_ids})
    assert len(effects) == len(run_ids)
    for key, status in effects:
        done = int(fleet.effects.get(f"effect:{key}") or 0)
        # A call cut off between its claim and its record comes back as an
        # "interrupted" error, never run again: at most once either way.
        assert done <= 1 and (status != "success" or done == 1), (key, status, done)


def _check_streamed_answer(run_id: str, events: list[dict[str, Any]]) -> None:
    """What a client shows as the answer (the text after the last
    ``llm.started`` of the answering turn) is the answer, once: nothing a
    delivery that was given away streamed lands after its successor began."""
    last_start = max(i for i, e in enumerate(events) if e["type"] == "llm.started" and e["data"]["iteration"] == 1)
    text = "".join(e["data"]["text"] for e in events[last_start:] if e["type"] == "content.delta")
    assert text == ANSWER, (run_id, text)


def _check_runs(fleet: Fleet, started: list[tuple[str, str, Follower]], summary: str) -> None:
    run_ids = [run_id for _, run_id, _ in started]
    runs = {run_id: _run(fleet.api, run_id) for run_id in run_ids}
    failed = {run_id: (run["status"], run["error"]) for run_id, run in runs.items() if run["status"] != "completed"}
    assert not failed, (summary, failed, fleet.logs())
    _check_ledger(fleet, run_ids)
    for conversation_id, run_id, follower in started:
        _check_transcript(fleet, conversation_id, run_id)
        events = follower.join()
        _check_events(run_id, events)
        _check_streamed_answer(run_id, events)


def _partition(fleet: Fleet, host: str) -> str:
    """Take the host off the network with its processes alive (or, on
    loopback, freeze them with SIGSTOP: alive, silent). How."""
    if fleet.network.partition(host):
        return "link cut at the switch, processes left running"
    for proc in fleet.on(host):
        os.killpg(proc.popen.pid, signal.SIGSTOP)
    return "processes frozen (loopback: no link to cut)"


def _heal(fleet: Fleet, host: str) -> None:
    fleet.network.heal(host)
    for proc in fleet.on(host):
        os.killpg(proc.popen.pid, signal.SIGCONT)  # a no-op unless frozen


def _wait_taken_over(fleet: Fleet, run_ids: list[str], held: list[Step], since: float) -> tuple[float, float]:
    """Wait until each step the lost host held has a new delivery; seconds
    from ``since`` to the first and to the last."""
    keys = {(step.kind, step.id) for step in held}
    first: float | None = None

    def all_taken() -> bool:
        nonlocal first
        again = [s for s in _steps(fleet.pg, run_ids) if (s.kind, s.id) in keys and s.deliveries >= 2]
        if again and first is None:
            first = time.monotonic() - since
        return len(again) == len(keys)

    wait_for(all_taken, timeout=60, what=f"the {len(keys)} step(s) {CUT} held to be delivered again")
    assert first is not None
    return first, time.monotonic() - since


def _announced_after(started: list[tuple[str, str, Follower]], held: list[Step], since: float) -> str:
    """When the runs of the held steps were told ``run.reconnecting`` (the
    lost host noticed and its steps sent on), in seconds after ``since``
    (wall clock; every host of the test shares this machine's clock), and
    for which step each."""
    runs = {step.run_id for step in held}
    notices = sorted(
        (datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp() - since, run_id[:8],
         event["data"]["step"], event["data"]["iteration"])
        for _, run_id, follower in started if run_id in runs
        for event in follower.events if event["type"] == "run.reconnecting")
    if not notices:
        return "never"
    return ", ".join(f"{at:.1f} s ({run} {step} {iteration})" for at, run, step, iteration in notices)


# -- the test ----------------------------------------------------------------

PARTITION_S = 20


def test_runs_spread_over_worker_hosts_and_survive_losing_one(fleet: Fleet) -> None:
    """With the shipped defaults: a 20 s partition of one worker host that
    heals, then the same host cut off for good (link down, processes
    killed). Both times its steps are delivered again on the other host
    within seconds, every run completes once, and nothing is done twice."""
    fleet.llm.add_script(MODEL, SCRIPT)
    print(f"network: {fleet.network.describe()}")

    # 1. A partition that heals: the host's processes live through it and
    # must find, once back, that their steps were given away.
    started = [_start_run(fleet, f"question {i}") for i in range(RUNS)]
    run_ids = [run_id for _, run_id, _ in started]
    wait_for(lambda: _ready_to_cut(fleet.pg, run_ids), timeout=60,
             what=f"steps on both worker hosts, some running on {CUT}")
    parted, parted_wall = time.monotonic(), time.time()
    how = _partition(fleet, CUT)
    held = [step for step in _steps(fleet.pg, run_ids) if step.host == CUT and step.status == "running"]
    first_s, last_s = _wait_taken_over(fleet, run_ids, held, parted)
    wait_for(lambda: time.monotonic() - parted >= PARTITION_S, timeout=PARTITION_S + 5, what="the partition's end")
    _heal(fleet, CUT)
    _wait_until_ended(fleet, run_ids, timeout=60)
    after = {(step.kind, step.id): step for step in _steps(fleet.pg, run_ids)}
    for _, _, follower in started:
        follower.join()
    summary = (f"{how} for {PARTITION_S} s: {len(held)} step(s) running on {CUT}, sent on at "
               f"{_announced_after(started, held, parted_wall)} and running again on {SURVIVOR} "
               f"{first_s:.1f}-{last_s:.1f} s after the partition began; steps by host at the end "
               f"{_by_host(list(after.values()))}")
    print(summary)
    print(fleet.liveness_log())
    assert held, summary
    taken_over = [after[(step.kind, step.id)] for step in held]
    assert all(step.host == SURVIVOR and step.finished_at for step in taken_over), f"{summary}: {_show(taken_over)}"
    _check_runs(fleet, started, summary)
    assert all(proc.popen.poll() is None for proc in fleet.on(CUT)), "the healed host's processes died"

    # 2. The same host, back under new names, takes steps again; now it is
    # cut off for good.
    started = [_start_run(fleet, f"question {i} again") for i in range(RUNS)]
    run_ids = [run_id for _, run_id, _ in started]
    wait_for(lambda: _ready_to_cut(fleet.pg, run_ids), timeout=60,
             what=f"steps on both worker hosts again, some running on {CUT}")
    before = _steps(fleet.pg, run_ids)
    cut, cut_wall = time.monotonic(), time.time()
    how = _cut_off(fleet, CUT)
    cut_at = _db_now(fleet.pg)  # after the cut: nothing on the cut host can finish a step later
    # Read after the cut: what the host was running when it went (a step it
    # finished between the first read and the cut is not lost).
    lost = [step for step in _steps(fleet.pg, run_ids) if step.host == CUT and step.status == "running"]
    first_s, last_s = _wait_taken_over(fleet, run_ids, lost, cut)
    _wait_until_ended(fleet, run_ids, timeout=60)
    after_cut = _steps(fleet.pg, run_ids)
    by_id = {(step.kind, step.id): step for step in after_cut}
    taken_over = [by_id[(step.kind, step.id)] for step in lost]
    finished_later = [step for step in after_cut if step.finished_at is not None and step.finished_at > cut_at]
    for _, _, follower in started:
        follower.join()
    summary = (f"{how}; steps by host before the cut {_by_host(before)}, at the end {_by_host(after_cut)}; "
               f"{len(lost)} running on {CUT} when it was cut off, sent on at "
               f"{_announced_after(started, lost, cut_wall)} and running again on {SURVIVOR} "
               f"{first_s:.1f}-{last_s:.1f} s after the cut; {len(finished_later)} finished after the cut")
    print(summary)
    assert set(_by_host(before)) == set(WORKER_HOSTS), summary
    assert lost and finished_later, summary
    assert {step.host for step in finished_later} == {SURVIVOR}, f"{summary}: {_show(finished_later)}"
    assert all(step.host == SURVIVOR and step.finished_at and step.deliveries >= 2 for step in taken_over), (
        f"{summary}: {_show(taken_over)}")
    _check_runs(fleet, started, summary)

    # The fleet still serves: a new run completes, on the host that is left.
    conversation_id, run_id, follower = _start_run(fleet, "one more")
    _wait_until_ended(fleet, [run_id], timeout=30)
    assert _status(fleet.api, run_id) == "completed", fleet.logs()
    last = _steps(fleet.pg, [run_id])
    assert len(last) == 4 and _by_host(last) == {SURVIVOR: 4}, (summary, last)
    _check_transcript(fleet, conversation_id, run_id)
    _check_events(run_id, follower.join())
