"""Orchestration overhead benchmark: `make bench` / `python -m bench.run`.

One run reports, on this machine:

1. per-step orchestration overhead from the step ledger (p50, p95, p99, max);
2. end to end, distributed / in-process, for 0, 1, 2, 3 tool rounds (one
   call each) and for one round of 2..5 parallel calls (tools 0 ms, the fake
   model answering each turn after 200 ms), plus a round of 5 parallel
   200 ms tools;
3. POST → 202, POST → first model request (the fake provider's own receipt
   time), and the tool round gap (the provider done sending a turn → the
   next model request arriving) for 1..5 calls;
4. SQL statements and Redis round trips per step, counted on a private
   Postgres (``pg_stat_statements``, one role per process) and private Redis
   servers (the broker's and the event log's: ``INFO`` counters, and
   ``redis-cli monitor`` to attribute commands to processes), for the POST,
   a model turn, a tool call and all steps;
5. short runs completed per second at saturation (the model answering at
   once; 0 and 1 tool rounds), posted by a bounded number of clients.

Everything runs against private services started here (``initdb`` and
``redis-server`` on free ports under a temporary directory), so nothing is
shared with the tests or other benchmarks. Results replace the generated
section of docs/performance.md (``--no-write``: print only).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

for _name in ("DATABASE_URL", "REDIS_URL"):  # this process only needs the model classes
    os.environ.pop(_name, None)
os.environ["DJANGO_SETTINGS_MODULE"] = "chatforge.settings"
os.environ.setdefault("CHATFORGE_LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

import httpx  # noqa: E402
import psycopg  # noqa: E402

from bench.counting import (  # noqa: E402
    ROLES,
    ClientCounts,
    ConnectionLog,
    ConnectionOwners,
    Monitor,
    Statements,
    by_kind,
    count_monitor,
    counting_postgres,
    per_process,
    per_step_counts,
    prepare_counting,
    redis_reset,
    redis_stats,
    role_url,
    summarize_queries,
)
from bench.load import RUNS_PER_USER, cpu_seconds, jobs_for, machine_busy, make_tokens  # noqa: E402
from bench.processes import children, process_tree  # noqa: E402
from bench.scenarios import (  # noqa: E402
    LLM_LATENCY_S,
    PARALLEL_CALLS,
    PARALLEL_TOOL_MS,
    TOOL_MS,
    Scenario,
    end_to_end_scenarios,
    instant,
    parallel_round,
    run_in_process,
)
from bench.services import (  # noqa: E402
    SECRET_KEY,
    add_env_argument,
    env_settings,
    fresh_database,
    percentile,
)
from bench.timed_provider import TimedFakeOpenAIServer  # noqa: E402
from chatforge.llm.providers.openai_compat import OpenAICompatibleProvider  # noqa: E402
from tests.support.client import follow_run  # noqa: E402
from tests.support.private_services import PrivatePostgres, PrivateRedis, private_redis  # noqa: E402
from tests.support.stack import (  # noqa: E402
    ROOT,
    TEST_SECRET_KEYS,
    Process,
    base_env,
    free_port,
    start_server,
    start_worker,
)
from tools.registry import build_registry  # noqa: E402

DB_NAME = "chatforge_bench"
DOC = ROOT / "docs" / "performance.md"
TOOL_MODULE = "tests.support.tools"  # wait_io / slow_sleep: a tool that takes as long as asked
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
LLM_CONCURRENCY = 500  # the LLM worker's gevent pool, as in production
TERMINAL = ("completed", "failed", "cancelled")


# ---------------------------------------------------------------------------
# The stack: one process per role, each with its own Postgres role
# ---------------------------------------------------------------------------


@dataclass
class Stack:
    api_url: str  # the web process that takes the POSTs
    ws_url: str  # the web process that serves the run sockets
    processes: dict[str, Process]


# The worker that runs the benchmark's tool calls, by the pool its tool is
# routed to (decision 0025): the tools_io worker's threads as deployed
# (deploy/Procfile), or the tools worker's prefork pool with a process per
# parallel call. Its Postgres role and its name here are "tools" either way.
TOOL_POOLS = ("io", "process")
IO_TOOL_THREADS = 16


def _tools_worker(pool: str, env: dict[str, str], log_dir: Path) -> Process:
    if pool == "io":
        return start_worker("tools", queues="tools_io", pool="threads", concurrency=IO_TOOL_THREADS, env=env,
                            log_dir=log_dir, node="tools-io@%h")
    return start_worker("tools", queues="tools", pool="prefork", concurrency=PARALLEL_CALLS, env=env,
                        log_dir=log_dir)


@contextmanager
def bench_stack(*, pg: PrivatePostgres, broker: PrivateRedis, events: PrivateRedis, provider_url: str,
                log_dir: Path, tool_pool: str = "io", extra_env: Sequence[str] = ()) -> Iterator[Stack]:
    """The LLM worker (gevent, as in production), the worker of the tool
    calls' pool (``_tools_worker``), and two web processes: ``web`` takes the
    REST requests, ``ws`` serves the run sockets, so that each one's
    statements and Redis commands are counted apart. Broker, throttle cache
    and channel layer on one Redis server, the event log on another.
    ``extra_env``: ``NAME=VALUE`` settings for every process (``--env``)."""
    common = base_env(
        REDIS_URL=broker.url(0),
        CHATFORGE_EVENT_LOG_REDIS_URL=events.url(0),
        DJANGO_SECRET_KEY=SECRET_KEY,
        CHATFORGE_SECRET_KEYS=TEST_SECRET_KEYS,
        OPENAI_BASE_URL=provider_url,
        OPENAI_API_KEY="bench",
        CHATFORGE_TOOL_MODULES=TOOL_MODULE,
        CHATFORGE_LOG_LEVEL="WARNING",
        # The throttle stays on (its Redis calls are part of a POST), high
        # enough for one user's sequential runs; identical calls all run.
        CHATFORGE_MESSAGE_RATE="100000/min",
        CHATFORGE_TOOL_REPEAT_LIMIT="1000",
        **env_settings(extra_env),
    )

    def env(role: str) -> dict[str, str]:
        return {**common, "DATABASE_URL": role_url(pg, DB_NAME, role)}

    processes: dict[str, Process] = {}
    try:
        processes["llm"] = start_worker("llm", queues="llm,default", pool="gevent",
                                        concurrency=LLM_CONCURRENCY, env=env("llm"), log_dir=log_dir)
        processes["tools"] = _tools_worker(tool_pool, env("tools"), log_dir)
        web_port, ws_port = free_port(), free_port()
        processes["web"] = start_server(port=web_port, env=env("web"), log_dir=log_dir, name="web")
        processes["ws"] = start_server(port=ws_port, env=env("ws"), log_dir=log_dir, name="ws")
        yield Stack(api_url=f"http://127.0.0.1:{web_port}", ws_url=f"ws://127.0.0.1:{ws_port}",
                    processes=processes)
    finally:
        for process in reversed(processes.values()):
            process.stop()


# ---------------------------------------------------------------------------
# Sequential runs
# ---------------------------------------------------------------------------


@dataclass
class Sequential:
    scenario: str
    tag: str  # the run's user message: finds its requests at the fake provider
    run_id: str
    posted_at: float  # time.time() just before the POST was sent
    post_ms: float  # POST sent → 202 read
    e2e_s: float  # POST sent → run.completed received on the run socket


def distributed_run(http: httpx.Client, ws_url: str, token: str, conversation: str,
                    scenario: Scenario) -> Sequential:
    tag = f"bench {scenario.name} {uuid.uuid4().hex[:12]}"
    posted_at = time.time()
    started = time.perf_counter()
    response = http.post(f"/api/conversations/{conversation}/messages/",
                         json={"content": tag, "model": scenario.name})
    accepted = time.perf_counter()
    assert response.status_code == 202, response.text
    run_id = response.json()["run_id"]
    events = follow_run(ws_url, run_id, token)
    elapsed = time.perf_counter() - started
    assert events[-1]["type"] == "run.completed", events[-1]
    return Sequential(scenario.name, tag, run_id, posted_at, (accepted - started) * 1000, elapsed)


def new_conversations(http: httpx.Client, count: int) -> list[str]:
    out = []
    for _ in range(count):
        response = http.post("/api/conversations/", json={})
        assert response.status_code == 201, response.text
        out.append(response.json()["id"])
    return out


def step_overheads(conn: psycopg.Connection, run_id: str) -> list[tuple[str, float]]:
    """Per step (each LLM turn, each tool call, finalize): the wait from its
    predecessor's end to its own start, plus its time that is not provider or
    tool work. (kind, milliseconds); kind is ``turn``, ``tool`` or ``finalize``."""
    run = conn.execute("SELECT created_at, finished_at FROM conversations_run WHERE id = %s",
                       (run_id,)).fetchone()
    turns = conn.execute(
        "SELECT iteration, started_at, finished_at, provider_ms FROM conversations_llmturn "
        "WHERE run_id = %s ORDER BY iteration", (run_id,)).fetchall()
    calls = conn.execute(
        "SELECT iteration, started_at, finished_at, duration_ms FROM conversations_toolinvocation "
        "WHERE run_id = %s", (run_id,)).fetchall()
    ms = lambda delta: delta.total_seconds() * 1000  # noqa: E731
    overheads: list[tuple[str, float]] = []
    previous_end = run[0]
    for iteration, started, finished, provider_ms in turns:
        overheads.append(("turn", ms(started - previous_end) + ms(finished - started) - provider_ms))
        round_calls = [c for c in calls if c[0] == iteration]
        for _, c_started, c_finished, duration_ms in round_calls:
            overheads.append(("tool", ms(c_started - finished) + ms(c_finished - c_started) - duration_ms))
        previous_end = max([c[2] for c in round_calls], default=finished)
    overheads.append(("finalize", ms(run[1] - previous_end)))
    return overheads


def parallel_round_ms(conn: psycopg.Connection, run_id: str) -> float:
    """From the model asking for the calls to the last result recorded."""
    asked = conn.execute("SELECT finished_at FROM conversations_llmturn WHERE run_id = %s AND iteration = 0",
                         (run_id,)).fetchone()[0]
    done = conn.execute("SELECT max(finished_at) FROM conversations_toolinvocation WHERE run_id = %s",
                        (run_id,)).fetchone()[0]
    return (done - asked).total_seconds() * 1000


def ledger_rows(conn: psycopg.Connection, run_ids: list[str]) -> tuple[int, int]:
    """(LlmTurn rows, ToolInvocation rows) of these runs."""
    turns = conn.execute("SELECT count(*) FROM conversations_llmturn WHERE run_id = ANY(%s::uuid[])",
                         (run_ids,)).fetchone()[0]
    calls = conn.execute("SELECT count(*) FROM conversations_toolinvocation WHERE run_id = ANY(%s::uuid[])",
                         (run_ids,)).fetchone()[0]
    return int(turns), int(calls)


# ---------------------------------------------------------------------------
# Counting
# ---------------------------------------------------------------------------


class Counters:
    """Statements per role, Redis counters of both servers, and (with
    ``monitor``) Redis commands and round trips per process."""

    def __init__(self, *, pg: PrivatePostgres, broker: PrivateRedis, events: PrivateRedis, stack: Stack,
                 log_dir: Path) -> None:
        self.statements = Statements(pg.url(DB_NAME))
        self.servers = {"broker": broker, "events": events}
        self.clients = {name: server.client() for name, server in self.servers.items()}
        self.stack = stack
        self.log_dir = log_dir
        self.monitors: dict[str, Monitor] = {}
        self.owners: ConnectionOwners | None = None
        self.pg = pg
        self.connections = ConnectionLog(pg.dir / "server.log")

    def start_monitors(self) -> None:
        pids = {name: p.popen.pid for name, p in self.stack.processes.items()}
        self.owners = ConnectionOwners(pids, {s.port for s in self.servers.values()},
                                       singles={"bench": os.getpid()}).start()
        self.monitors = {name: Monitor(server.port, self.log_dir / f"monitor-{name}.txt").start()
                         for name, server in self.servers.items()}
        time.sleep(0.3)  # redis-cli connected and monitoring

    def stop_monitors(self) -> dict[str, list[str]]:
        lines = {name: monitor.stop() for name, monitor in self.monitors.items()}
        assert self.owners is not None
        self.owners.stop()
        return lines

    def reset(self) -> None:
        self.statements.reset()
        for client in self.clients.values():
            redis_reset(client)

    def read(self) -> dict:
        return {
            "sql": {role: calls for role, calls in self.statements.read().items()},
            "redis": {name: redis_stats(client) for name, client in self.clients.items()},
        }

    def attribute(self, lines: dict[str, list[str]], start: float,
                  end: float) -> dict[str, dict[str, ClientCounts]]:
        """Per Redis server, per process: commands and round trips sent in [start, end)."""
        assert self.owners is not None
        out = {}
        for name, server_lines in lines.items():
            window = [line for line in server_lines if start <= _stamp(line) < end]
            out[name] = per_process(count_monitor(window), self.servers[name].port, self.owners)
        return out


def _stamp(line: str) -> float:
    try:
        return float(line.split(" ", 1)[0])
    except ValueError:
        return -1.0


# ---------------------------------------------------------------------------
# Saturation
# ---------------------------------------------------------------------------


async def _post_all(api_url: str, jobs: list[dict], model: str, clients: int) -> list[dict]:
    """``clients`` concurrent clients post the jobs one after another each."""
    pending = list(jobs)
    results: list[dict] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=api_url, timeout=120, limits=limits) as http:
        async def client() -> None:
            while pending:
                job = pending.pop(0)
                posted_at = time.time()
                started = time.perf_counter()
                response = await http.post(
                    f"/api/conversations/{job['conversation_id']}/messages/",
                    json={"content": f"saturation {job['index']}", "model": model},
                    headers={"Authorization": f"Bearer {job['token']}"},
                )
                results.append({
                    "posted_at": posted_at,
                    "post_ms": (time.perf_counter() - started) * 1000,
                    "status": response.status_code,
                    "run_id": response.json().get("run_id", "") if response.status_code == 202 else "",
                })

        await asyncio.gather(*(client() for _ in range(clients)))
    return results


def saturation(stack: Stack, scenario: Scenario, jobs: list[dict], *, clients: int, admin_url: str,
               give_up_s: float = 120.0) -> tuple[dict, list[str]]:
    """The report, and the ids of the runs accepted."""
    results = asyncio.run(_post_all(stack.api_url, jobs, scenario.name, clients))
    run_ids = [r["run_id"] for r in results if r["run_id"]]
    first_post = min(r["posted_at"] for r in results)
    deadline = time.monotonic() + give_up_s
    with psycopg.connect(admin_url, autocommit=True) as conn:
        while True:
            ended, completed, last, latencies = conn.execute(
                "SELECT count(*) FILTER (WHERE status = ANY(%s)), "
                "count(*) FILTER (WHERE status = 'completed'), "
                "max(finished_at), array_agg(extract(epoch FROM finished_at - created_at) * 1000) "
                "FILTER (WHERE status = 'completed') FROM conversations_run WHERE id = ANY(%s::uuid[])",
                (list(TERMINAL), run_ids)).fetchone()
            if ended >= len(run_ids) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    wall_s = (last.timestamp() - first_post) if last else float("nan")
    post_ms = [r["post_ms"] for r in results]
    run_ms = [float(v) for v in latencies or []]
    return {
        "scenario": scenario.name,
        "runs": len(jobs),
        "clients": clients,
        "accepted": len(run_ids),
        "refused": sum(1 for r in results if r["status"] != 202),
        "completed": int(completed),
        "wall_s": round(wall_s, 2),
        "runs_per_s": round(completed / wall_s, 1) if last else 0.0,
        "steps_per_s": round(completed * scenario.steps / wall_s, 1) if last else 0.0,
        "post_p50_ms": round(percentile(post_ms, 50), 1),
        "post_p95_ms": round(percentile(post_ms, 95), 1),
        "run_p50_ms": round(percentile(run_ms, 50), 1),
        "run_p95_ms": round(percentile(run_ms, 95), 1),
    }, run_ids


# ---------------------------------------------------------------------------
# Machine load
# ---------------------------------------------------------------------------


def our_cpu(roots: list[int]) -> float:
    """CPU seconds of these processes, their children (alive, or ended and
    waited for) and this process."""
    family = children()
    return sum(cpu_seconds(p) for root in roots for p in process_tree(root, family))


def cpu_by_part(roots: list[int], parts: dict[str, int]) -> dict[str, float]:
    """CPU seconds per part of the benchmark (each part a process with its
    children: a worker's pool, Postgres' backends); ``bench`` is the rest of
    ``roots``' trees: this process (clients, fake model) and the monitors."""
    family = children()

    def tree(pid: int) -> float:
        return sum(cpu_seconds(p) for p in process_tree(pid, family))

    out = {name: tree(pid) for name, pid in parts.items()}
    out["bench"] = sum(tree(root) for root in roots) - sum(out.values())
    return out


def git_state() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    dirty = git("status", "--porcelain", "--", "orchestration", "chatforge", "tools").splitlines()
    state = f"commit {git('rev-parse', '--short', 'HEAD') or '?'}"
    if dirty:
        state += f" with uncommitted changes to {len(dirty)} engine files"
    return state


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def dist(values: list[float]) -> dict:
    return {"p50": round(percentile(values, 50), 1), "p95": round(percentile(values, 95), 1),
            "p99": round(percentile(values, 99), 1), "max": round(max(values, default=0.0), 1),
            "n": len(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="measured runs per end-to-end scenario")
    parser.add_argument("--parallel-runs", type=int, default=5, help="runs of the 5 × 200 ms round")
    parser.add_argument("--saturation-runs", type=int, default=500)
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients posting at saturation")
    parser.add_argument("--idle-s", type=float, default=3.0, help="idle window counted before the runs")
    parser.add_argument("--tool-pool", choices=TOOL_POOLS, default="io",
                        help="the pool the tool calls run on: the tools_io worker's threads (io) or the "
                             "tools worker's prefork processes (process)")
    add_env_argument(parser)
    parser.add_argument("--json", default="", help="also write the results to this file")
    parser.add_argument("--no-write", action="store_true",
                        help="Print only; leave docs/performance.md alone.")
    parser.add_argument("--from-json", default="",
                        help="rewrite the doc from a saved --json file; run nothing")
    args = parser.parse_args()
    if args.from_json:
        write_doc(json.loads(Path(args.from_json).read_text()))
        return

    log_dir = Path(tempfile.mkdtemp(prefix="chatforge-bench-"))
    scenarios = end_to_end_scenarios(args.tool_pool)
    parallel = parallel_round(args.tool_pool)
    instants = [instant(0, args.tool_pool), instant(1, args.tool_pool)]
    fake = TimedFakeOpenAIServer().start()
    for scenario in [*scenarios, parallel, *instants]:
        fake.add_script(scenario.name, list(scenario.replies))
    provider = OpenAICompatibleProvider(base_url=fake.base_url, api_key="bench")
    registry = build_registry([TOOL_MODULE])
    started_at = time.monotonic()
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    code = git_state()  # what the stack's processes load

    try:
        with counting_postgres() as pg, private_redis() as broker, private_redis() as events:
            database_url = fresh_database(pg=pg.url("postgres").rsplit("/", 1)[0], name=DB_NAME,
                                          redis_url=broker.url(0))
            prepare_counting(pg, DB_NAME)
            saturation_users = len(instants) * -(-args.saturation_runs // RUNS_PER_USER)
            tokens = make_tokens(1 + saturation_users, "bench", database_url, broker.url(0))
            token, saturation_tokens = tokens[0], tokens[1:]
            with bench_stack(pg=pg, broker=broker, events=events, provider_url=fake.base_url,
                             log_dir=log_dir, tool_pool=args.tool_pool, extra_env=args.env) as stack:
                results = measure(args, stack=stack, pg=pg, broker=broker, events=events, fake=fake,
                                  provider=provider, registry=registry, token=token, scenarios=scenarios,
                                  parallel=parallel, instants=instants, saturation_tokens=saturation_tokens,
                                  database_url=database_url, log_dir=log_dir)
                logs = "".join(p.log() for p in stack.processes.values())
    finally:
        fake.stop()
    results["code"] = code
    results["tracebacks_in_logs"] = logs.count("Traceback")
    results["total_s"] = round(time.monotonic() - started_at, 1)
    results["loadavg_before"] = load_before
    print(json.dumps(results, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    if not args.no_write:
        write_doc(results)


def measure(args: argparse.Namespace, *, stack: Stack, pg: PrivatePostgres, broker: PrivateRedis,
            events: PrivateRedis, fake: TimedFakeOpenAIServer, provider: OpenAICompatibleProvider, registry,
            token: str, scenarios: list[Scenario], parallel: Scenario, instants: list[Scenario],
            saturation_tokens: list[str], database_url: str, log_dir: Path) -> dict:
    http = httpx.Client(base_url=stack.api_url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    counters = Counters(pg=pg, broker=broker, events=events, stack=stack, log_dir=log_dir)
    admin_url = pg.url(DB_NAME)
    # This process' tree holds the stack, the Redis servers and the monitors;
    # the postmaster detached from pg_ctl.
    postmaster = int((pg.data / "postmaster.pid").read_text().split()[0])
    roots = [os.getpid(), postmaster]
    parts = {**{name: process.popen.pid for name, process in stack.processes.items()},
             "postgres": postmaster, "redis broker": broker.popen.pid, "redis events": events.popen.pid}

    # Warm-up: imports, connections, the scripts' first requests.
    for scenario in [*scenarios, parallel]:
        conversation = new_conversations(http, 1)[0]
        distributed_run(http, stack.ws_url, token, conversation, scenario)
        run_in_process(provider, registry, scenario.name, f"warm-up {uuid.uuid4().hex}")

    # One POST counted alone (the web process does nothing else meanwhile).
    conversation = new_conversations(http, 1)[0]
    counters.statements.reset()
    distributed_run(http, stack.ws_url, token, conversation, scenarios[0])
    single_post = counters.statements.read()["web"]

    # Measured: each scenario in turn, distributed then in-process, counted.
    conversations = iter(new_conversations(http, args.runs * len(scenarios)))
    counters.start_monitors()
    cpu_start, busy_start = our_cpu(roots), machine_busy()
    counters.reset()
    idle_start = time.time()
    time.sleep(args.idle_s)
    idle = counters.read()
    counters.reset()
    measured_start = time.time()
    log_start = counters.connections.offset()
    runs: list[Sequential] = []
    baseline: dict[str, list[float]] = {s.name: [] for s in scenarios}
    for _ in range(args.runs):
        for scenario in scenarios:
            runs.append(distributed_run(http, stack.ws_url, token, next(conversations), scenario))
            baseline[scenario.name].append(run_in_process(provider, registry, scenario.name,
                                                          f"in-process {uuid.uuid4().hex}"))
    log_end = counters.connections.offset()
    counted = counters.read()
    measured_end = time.time()
    cpu_end, busy_end = our_cpu(roots), machine_busy()
    lines = counters.stop_monitors()
    redis_idle = counters.attribute(lines, idle_start, measured_start)
    redis_measured = counters.attribute(lines, measured_start, measured_end)

    # The 5 × 200 ms round (not counted).
    parallel_runs = [distributed_run(http, stack.ws_url, token, c, parallel)
                     for c in new_conversations(http, args.parallel_runs)]

    # Saturation: each instant scenario, its own users, counted (totals only).
    per_scenario_users = len(saturation_tokens) // len(instants)
    saturated = []
    saturated_ids = []
    for index, scenario in enumerate(instants):
        jobs = jobs_for(args.saturation_runs,
                        saturation_tokens[index * per_scenario_users:(index + 1) * per_scenario_users],
                        [stack.api_url])
        time.sleep(1.0)
        sat_parts_start, sat_busy_start = cpu_by_part(roots, parts), machine_busy()
        counters.reset()
        log_start = counters.connections.offset()
        report, ids = saturation(stack, scenario, jobs, clients=args.clients, admin_url=admin_url)
        report["counts"] = counters.read()
        report["pg_connections_by_process"] = counters.connections.count(log_start,
                                                                         counters.connections.offset())
        saturated_ids.append(ids)
        sat_parts_end, sat_busy_end = cpu_by_part(roots, parts), machine_busy()
        report["machine_busy_cpu_s"] = round(sat_busy_end[0] - sat_busy_start[0], 1)
        report["bench_cpu_s"] = round(sum(sat_parts_end.values()) - sum(sat_parts_start.values()), 1)
        report["cpu_ms_per_run_by_part"] = {
            name: round((sat_parts_end[name] - sat_parts_start[name]) * 1000 / max(report["completed"], 1), 1)
            for name in sat_parts_end}
        report["window_s"] = round((sat_busy_end[1] - sat_busy_start[1]) / os.cpu_count(), 1)
        saturated.append(report)
    http.close()

    with psycopg.connect(admin_url) as conn:
        overheads: dict[str, list[float]] = {s.name: [] for s in scenarios}
        overheads_by_kind: dict[str, list[float]] = {"turn": [], "tool": [], "finalize": []}
        for run in runs:
            for kind, value in step_overheads(conn, run.run_id):
                overheads[run.scenario].append(value)
                overheads_by_kind[kind].append(value)
        rounds_ms = [parallel_round_ms(conn, run.run_id) for run in parallel_runs]
        turns, calls = ledger_rows(conn, [run.run_id for run in runs])
        for report, ids in zip(saturated, saturated_ids):
            sat_turns, sat_calls = ledger_rows(conn, ids)
            sat_counts = report.pop("counts")
            sql = {role: by_kind(calls) for role, calls in sat_counts["sql"].items()}
            report["redis_reads_per_run"] = {server: round(stats["reads"] / max(report["accepted"], 1), 1)
                                             for server, stats in sat_counts["redis"].items()}
            report["sql_per_post"] = round(sql["web"]["total"] / max(report["accepted"], 1), 1)
            report["sql_per_step"] = round(
                (sql["llm"]["total"] + sql["tools"]["total"]) / max(sat_turns + sat_calls, 1), 1)
            report["ledger_turns"], report["ledger_calls"] = sat_turns, sat_calls

    # Provider's clock: first model request, tool round gaps.
    first_request = []
    gaps: dict[int, list[float]] = {}
    by_name = {s.name: s for s in scenarios}
    for run in runs:
        requests = fake.requests_of(run.tag)
        first_request.append((requests[0].arrived_at - run.posted_at) * 1000)
        calls_per_round = by_name[run.scenario].calls
        for before, after in zip(requests, requests[1:]):
            if before.done_at is not None:
                gaps.setdefault(calls_per_round, []).append((after.arrived_at - before.done_at) * 1000)

    all_overheads = [o for values in overheads.values() for o in values]
    e2e = {}
    for scenario in scenarios:
        distributed = [r.e2e_s * 1000 for r in runs if r.scenario == scenario.name]
        in_process = [s * 1000 for s in baseline[scenario.name]]
        e2e[scenario.name] = {
            "label": scenario.label,
            "steps": scenario.steps,
            "distributed_p50_ms": round(statistics.median(distributed), 1),
            "distributed_p95_ms": round(percentile(distributed, 95), 1),
            "in_process_p50_ms": round(statistics.median(in_process), 1),
            "ratio_p50": round(statistics.median(distributed) / statistics.median(in_process), 3),
            "overhead_p50_ms": round(percentile(overheads[scenario.name], 50), 1),
        }

    steps = {"posts": len(runs), "runs": len(runs), "turns": turns, "calls": calls}
    window_s = measured_end - measured_start
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "runs_per_scenario": args.runs,
        "tool_ms": TOOL_MS,
        "tool_pool": args.tool_pool,
        "llm_latency_ms": int(LLM_LATENCY_S * 1000),
        "overhead_ms": dist(all_overheads),
        "overhead_by_kind_ms": {kind: dist(values) for kind, values in overheads_by_kind.items()},
        "post_202_ms": dist([r.post_ms for r in runs]),
        "post_to_first_model_request_ms": dist(first_request),
        "tool_round_gap_ms": {str(n): dist(v) for n, v in sorted(gaps.items())},
        "end_to_end": e2e,
        "parallel_round_ms": {"calls": PARALLEL_CALLS, "tool_ms": PARALLEL_TOOL_MS,
                              "p50": round(statistics.median(rounds_ms), 1), "max": round(max(rounds_ms), 1)},
        "counts": {
            "steps": steps,
            "window_s": round(window_s, 1),
            "sql_by_process": {role: by_kind(counted["sql"][role]) for role in ROLES},
            "sql_queries": {role: dict(counted["sql"][role].most_common()) for role in ROLES},
            "sql_per_step_by_statement": {
                "post": summarize_queries(counted["sql"]["web"], len(runs)),
                "turn": summarize_queries(counted["sql"]["llm"], turns),
                "tool": summarize_queries(counted["sql"]["tools"], calls),
            },
            "single_post_sql": {"total": sum(single_post.values()),
                                "statements": summarize_queries(single_post)},
            "pg_connections_by_process": counters.connections.count(log_start, log_end),
            "redis_servers": counted["redis"],
            "redis_by_process": {server: {name: {"commands": c.commands, "round_trips": c.round_trips,
                                                 "by_command": dict(c.by_command.most_common())}
                                          for name, c in sorted(procs.items())}
                                 for server, procs in redis_measured.items()},
            "idle": {
                "window_s": round(measured_start - idle_start, 1),
                "sql_by_process": {role: by_kind(idle["sql"][role]) for role in ROLES},
                "redis_by_process": {server: {name: {"commands": c.commands, "round_trips": c.round_trips,
                                                     "by_command": dict(c.by_command.most_common())}
                                              for name, c in sorted(procs.items())}
                                     for server, procs in redis_idle.items()},
            },
        },
        "saturation": saturated,
        "machine_load": {
            "window_s": round((busy_end[1] - busy_start[1]) / os.cpu_count(), 1),
            "machine_busy_cpu_s": round(busy_end[0] - busy_start[0], 1),
            "bench_cpu_s": round(cpu_end - cpu_start, 1),
        },
    }


# ---------------------------------------------------------------------------
# The generated section of docs/performance.md
# ---------------------------------------------------------------------------


def _statements(listed: list, limit: int = 12) -> str:
    parts = [f"`{name}` ×{round(n, 2):g}" for name, n in listed[:limit]]
    if len(listed) > limit:
        parts.append(f"{len(listed) - limit} more")
    return ", ".join(parts)


def _tool_pool(r: dict) -> str:
    return r.get("tool_pool", "process")  # results saved before the I/O pool were all prefork


def _tool_described(r: dict) -> str:
    if _tool_pool(r) == "io":
        return f"`wait_io` on the I/O pool (a tools_io worker, {IO_TOOL_THREADS} threads)"
    return f"`slow_sleep` on the prefork pool (a tools worker, {PARALLEL_CALLS} processes)"


def _tools_worker_named(r: dict) -> str:
    return "tools_io worker" if _tool_pool(r) == "io" else "tools worker"


def write_doc(r: dict) -> None:
    met = lambda ok: "met" if ok else "**not met**"  # noqa: E731
    o, post, first = r["overhead_ms"], r["post_202_ms"], r["post_to_first_model_request_ms"]
    kinds = r["overhead_by_kind_ms"]
    gaps = r["tool_round_gap_ms"]
    par = r["parallel_round_ms"]
    counts = r["counts"]
    load = r["machine_load"]
    other_s = load["machine_busy_cpu_s"] - load["bench_cpu_s"]
    e2e_rows = "\n".join(
        f"| {e['label']} | {e['steps']} | {e['distributed_p50_ms']:.0f} ms | {e['in_process_p50_ms']:.0f} ms "
        f"| **{e['ratio_p50']:.2f}** | {met(e['ratio_p50'] <= 1.05)} |"
        for e in r["end_to_end"].values()
    )
    gap_rows = "\n".join(
        f"| tool round gap, {n} call{'s' if n != '1' else ''} (p50 / p95) "
        f"| {g['p50']:.1f} / {g['p95']:.1f} ms | | |"
        for n, g in gaps.items()
    )
    count_rows = "\n".join(
        f"| {c['label']} | {c['count']} | {c['sql']:.1f} ({c['sql_transaction']:.1f}) "
        f"| {c['redis_broker']:.1f} / {c['redis_events']:.1f} | {c['redis_commands']:.1f} "
        f"| {c['pg_connections']:.2f} |"
        for c in per_step_counts(counts)
    )
    servers = counts["redis_servers"]
    attributed = {s: sum(p["round_trips"] for name, p in procs.items() if name != "bench")
                  for s, procs in counts["redis_by_process"].items()}
    unattributed = sum(procs.get("unattributed", {}).get("round_trips", 0)
                       for procs in counts["redis_by_process"].values())
    by_statement = counts["sql_per_step_by_statement"]
    new_connections = ", ".join(f"{k} {v}" for k, v in counts["pg_connections_by_process"].items())
    single = counts["single_post_sql"]
    sat_rows = "\n".join(
        f"| {s['runs']} runs, {'0 tool rounds' if s['scenario'].endswith('r0') else '1 tool round (1 call)'} "
        f"| {s['completed']} / {s['runs']} in {s['wall_s']:.1f} s | **{s['runs_per_s']:.1f} runs/s** "
        f"({s['steps_per_s']:.0f} steps/s) | {s['post_p50_ms']:.0f} / {s['post_p95_ms']:.0f} ms "
        f"| {s['run_p50_ms']:.0f} / {s['run_p95_ms']:.0f} ms "
        f"| {s['sql_per_post']:.1f} / {s['sql_per_step']:.1f} "
        f"| {s['bench_cpu_s'] * 1000 / max(s['completed'], 1):.0f} ms ({s['bench_cpu_s']:.0f} of "
        f"{s['machine_busy_cpu_s']:.0f} CPU-s) | {met(s['runs_per_s'] >= 100)} |"
        for s in r["saturation"]
    )
    part_names = [("llm", "LLM worker"), ("tools", _tools_worker_named(r)), ("web", "web"), ("ws", "ws"),
                  ("postgres", "Postgres"), ("redis broker", "Redis broker"), ("redis events", "Redis event log"),
                  ("bench", "benchmark (clients, fake model)")]
    cpu_rows = "\n".join(
        f"| {'0 tool rounds' if s['scenario'].endswith('r0') else '1 tool round'} | "
        + " | ".join(f"{s['cpu_ms_per_run_by_part'].get(key, 0):.1f}" for key, _ in part_names) + " |"
        for s in r["saturation"] if "cpu_ms_per_run_by_part" in s
    )
    cpu_table = f"""

CPU per run at saturation by process, ms (each process with its children: a
worker's pool, Postgres' backends):

| load | {' | '.join(label for _, label in part_names)} |
|---|{'---|' * len(part_names)}
{cpu_rows}""" if cpu_rows else ""
    section = f"""{BEGIN}
Last run: {r['date']} on {r['machine']} (`make bench`, {r['code']}; {r['total_s']:.0f} s in all).
The machine is shared: while the counted runs below ran ({load['window_s']:.0f} s) it was busy
{load['machine_busy_cpu_s']:.0f} CPU-s, of which the benchmark's own processes (stack, Postgres, Redis, fake
model, clients) used {load['bench_cpu_s']:.0f} and other work {other_s:.0f}; load average before the run
{' / '.join(r['loadavg_before'])}. Fake model: {r['llm_latency_ms']} ms to first byte per turn; tools:
{_tool_described(r)} of {r['tool_ms']} ms. {r['runs_per_scenario']} measured runs per scenario after one warm-up run each.

| measure | result | target | |
|---|---|---|---|
| orchestration overhead per step, p50 | {o['p50']:.1f} ms | ≤ 5 ms | {met(o['p50'] <= 5)} |
| orchestration overhead per step, p95 | {o['p95']:.1f} ms | ≤ 10 ms | {met(o['p95'] <= 10)} |
| orchestration overhead per step, p99 / max | {o['p99']:.1f} / {o['max']:.1f} ms ({o['n']} steps) | | |
| overhead p50 by step: model turn / tool call / finalize | {kinds['turn']['p50']:.1f} / \
{kinds['tool']['p50']:.1f} / {kinds['finalize']['p50']:.1f} ms | | |
| POST → 202 (p50 / p95) | {post['p50']:.1f} / {post['p95']:.1f} ms | ≤ 8 ms | {met(post['p50'] <= 8)} (p50) |
| POST → first model request at the provider (p50 / p95) | {first['p50']:.1f} / {first['p95']:.1f} ms | | |
{gap_rows}
| round of {par['calls']} parallel {par['tool_ms']} ms tools (p50 / max) | {par['p50']:.0f} / {par['max']:.0f} ms \
| ≤ {1.2 * par['tool_ms']:.0f} ms | {met(par['p50'] <= 1.2 * par['tool_ms'])} |

End to end, p50: distributed (POST sent → `run.completed` received on the run socket) against
the same conversation in a plain in-process loop:

| scenario | steps | distributed | in-process | ratio | ≤ 1.05 |
|---|---|---|---|---|---|
{e2e_rows}

Counted over the {counts['steps']['runs']} measured runs above ({counts['steps']['turns']} model turns,
{counts['steps']['calls']} tool calls, {counts['window_s']:.0f} s): SQL statements from `pg_stat_statements`
(one Postgres role per process; in brackets BEGIN / COMMIT / savepoints), Redis round trips to the broker's
server / the event log's server and Redis commands from `redis-cli monitor`, each divided by the
rows of its kind:

| per | count | SQL statements (transaction control) | Redis round trips, broker / event log | Redis commands \
| new Postgres connections |
|---|---|---|---|---|---|
{count_rows}

Redis read events counted by the servers themselves in the same window: broker
{servers['broker']['reads']}, event log {servers['events']['reads']}; round trips counted from the monitor
lines of the stack's processes: {attributed.get('broker', 0)} and {attributed.get('events', 0)} (of which on
connections no sample could attribute to a process: {unattributed}). New Postgres connections opened in the window
(`log_connections`), per process: {new_connections}.

Statements, per step of each kind (the engine's own queries, shortened to verb and table):

- one POST counted alone: {single['total']} — {_statements(single['statements'])};
- model turn: {_statements(by_statement['turn'])};
- tool call: {_statements(by_statement['tool'])}.

Saturation: the model answering at once, tools 0 ms, {r['saturation'][0]['clients']} concurrent clients
posting one after another (5 runs per user, no sockets); runs/s = completed / (first POST sent → last
run finished):

| load | completed | throughput | POST → 202 p50 / p95 | run created → finished p50 / p95 \
| SQL per POST / per step | CPU per run (benchmark's CPU of the machine's busy CPU) | ≥ 100 runs/s |
|---|---|---|---|---|---|---|---|
{sat_rows}{cpu_table}
{END}"""
    text = DOC.read_text() if DOC.exists() else ""
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:
        text = text + "\n" + section + "\n"
    DOC.write_text(text)


if __name__ == "__main__":
    main()
