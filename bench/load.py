"""Load: concurrent streaming runs at a real model's pace, each followed on
its own websocket: `python -m bench.load --runs 1,20,100 --tokens-per-s 50`.

Starts a private Postgres (``--pg-max-connections``) and a private Redis,
the load provider (``bench/load_provider.py``: a fake OpenAI server that
streams a ``--duration`` s answer one SSE chunk per token at
``--tokens-per-s``, each chunk stamped with its emit time), and then, for
each ``--pool`` option in turn, a fresh database and the real stack:
``--web`` uvicorn web processes, ``--llm`` LLM workers with that pool
(``gevent:1000`` …) and a prefork tools worker. Users (5 runs each, the
default per-user cap) and one conversation per run are made before the
clock starts; a warm-up wave runs first. Then, for each level of
``--runs`` in turn on the same stack, that many runs are started at once
(or spread over ``--ramp`` seconds) through ``POST …/messages/`` from
``--client-procs`` client processes, each run followed on its own websocket.

Reported per level (JSON, and a Markdown table at the end): runs completed
and failed, lost/repeated seqs and chunks per socket, close codes, relay
latency p50/p95/p99/max (provider emit → websocket receipt, for chunks
emitted after their socket opened; the others, sent when it opens, are
counted apart) and the provider → worker publish part of it, time to first
event (POST → first ``content.delta``) and its two parts, ``content.delta``
events per token relayed (below 1 where the worker merged tokens), CPU µs
per relayed token by process kind (LLM workers, web and socket processes,
Postgres, Redis, the provider, the clients), the peak number of runs
streaming at once (from the provider's own stream records), the provider's
own lateness, and per process: peak RSS, peak Postgres / Redis / provider
connections (its sockets, from /proc), CPU seconds used during the
measured window; plus peak ``pg_stat_activity`` and the machine's CPU not
used by the benchmark (other load).

Bounded: at most 2,000 runs a level; every client gives up ``--give-up``
seconds (default 180) after its start.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import multiprocessing
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psycopg

from bench.load_client import run_clients
from bench.processes import children, process_tree
from bench.services import (
    SECRET_KEY,
    add_env_argument,
    env_settings,
    fresh_database,
    manage_env,
    percentile,
)
from tests.support.private_services import PrivatePostgres, PrivateRedis, private_postgres, private_redis
from tests.support.stack import (
    ROOT,
    TEST_SECRET_KEYS,
    Process,
    base_env,
    free_port,
    launch_worker,
    start_process,
    start_server,
    start_worker,
    wait_for,
    wait_for_worker,
)

MODEL = "bench-load"
DB_NAME = "chatforge_load"
RUNS_PER_USER = 5  # CHATFORGE_MAX_ACTIVE_RUNS_PER_USER's default
MAX_RUNS = 2000
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


# ---------------------------------------------------------------------------
# Processes as the kernel sees them: trees, RSS, CPU, sockets
# ---------------------------------------------------------------------------


def rss_bytes(pid: int, *, private: bool = False) -> int:
    """Resident memory; ``private``: only anonymous pages (for Postgres, whose
    backends all map the same shared buffers)."""
    try:
        if private:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
            return 0
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, IndexError):
        return 0


def cpu_seconds(pid: int) -> float:
    """CPU time of the process and of its children that ended (and were
    waited for): Postgres backends come and go during a measurement."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return sum(int(v) for v in fields[11:15]) / TICK  # utime, stime, cutime, cstime


def threads_of(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def tcp_remote_ports() -> dict[int, int]:
    """Established TCP sockets on this machine: inode → remote port."""
    found: dict[int, int] = {}
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if parts[3] == "01":  # ESTABLISHED
                found[int(parts[9])] = int(parts[2].rsplit(":", 1)[1], 16)
    return found


def socket_inodes(pid: int) -> list[int]:
    inodes = []
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.append(int(target[8:-1]))
    except OSError:
        pass
    return inodes


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    total = sum(values[:8])
    return (total - idle) / TICK, total / TICK


@dataclass
class ProcessStats:
    peak_rss: int = 0
    peak_threads: int = 0
    peak_conns: Counter = field(default_factory=Counter)
    cpu_start: float = 0.0
    cpu_end: float = 0.0


class Sampler:
    """Samples every process tree (RSS, threads, sockets by remote port) and
    ``pg_stat_activity`` a few times a second while the load runs."""

    def __init__(
        self, pids: dict[str, int], ports: dict[str, int], pg_url: str, interval_s: float = 0.25
    ) -> None:
        self.pids = pids
        self.ports = {port: name for name, port in ports.items()}
        self.pg_url = pg_url
        self.interval_s = interval_s
        self.stats = {name: ProcessStats() for name in pids}
        self.pg_peak: Counter = Counter()
        self.pg_peak_total = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _trees(self) -> dict[str, list[int]]:
        tree = children()
        return {name: process_tree(pid, tree) for name, pid in self.pids.items()}

    def start(self) -> None:
        for name, tree in self._trees().items():
            self.stats[name].cpu_start = sum(cpu_seconds(p) for p in tree)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for name, tree in self._trees().items():
            self.stats[name].cpu_end = sum(cpu_seconds(p) for p in tree)

    def _loop(self) -> None:
        with psycopg.connect(self.pg_url, autocommit=True) as conn:
            while not self._stop.wait(self.interval_s):
                self._sample(conn)

    def _sample(self, conn: psycopg.Connection) -> None:
        remote = tcp_remote_ports()
        for name, tree in self._trees().items():
            stats = self.stats[name]
            stats.peak_rss = max(stats.peak_rss, sum(rss_bytes(p, private=name == "postgres") for p in tree))
            stats.peak_threads = max(stats.peak_threads, sum(threads_of(p) for p in tree))
            counts = Counter(
                self.ports.get(remote.get(inode, -1), "") for p in tree for inode in socket_inodes(p)
            )
            counts.pop("", None)
            for kind, count in counts.items():
                stats.peak_conns[kind] = max(stats.peak_conns[kind], count)
        rows = conn.execute(
            "SELECT coalesce(state, '?'), count(*) FROM pg_stat_activity "
            "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() GROUP BY 1"
        ).fetchall()
        by_state = Counter(dict(rows))
        self.pg_peak_total = max(self.pg_peak_total, sum(by_state.values()))
        for state, count in by_state.items():
            self.pg_peak[state] = max(self.pg_peak[state], count)


# ---------------------------------------------------------------------------
# Setup: users, tokens, conversations
# ---------------------------------------------------------------------------

_MAKE_USERS = """
import json
from django.contrib.auth import get_user_model
from chatforge.accounts.tokens import api_token_create
User = get_user_model()
tokens = []
for i in range({count}):
    user = User.objects.create(username="load-{prefix}-%d" % i)
    tokens.append(api_token_create(user=user, name="load").plaintext)
print(json.dumps(tokens))
"""


def make_tokens(count: int, prefix: str, database_url: str, redis_url: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", _MAKE_USERS.format(count=count, prefix=prefix)],
        cwd=ROOT,
        env=manage_env(database_url, redis_url),
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


async def _conversations(http_bases: list[str], tokens: list[str]) -> list[str]:
    semaphore = asyncio.Semaphore(16)

    async def one(http: httpx.AsyncClient, token: str) -> str:
        async with semaphore:
            response = await http.post(
                "/api/conversations/", json={}, headers={"Authorization": f"Bearer {token}"}
            )
            response.raise_for_status()
            return response.json()["id"]

    async with httpx.AsyncClient(base_url=http_bases[0], timeout=60) as http:
        return list(await asyncio.gather(*(one(http, t) for t in tokens)))


def jobs_for(count: int, tokens: list[str], http_bases: list[str]) -> list[dict]:
    """One conversation per run; run i belongs to user i // RUNS_PER_USER."""
    owners = [tokens[i // RUNS_PER_USER] for i in range(count)]
    conversations = asyncio.run(_conversations(http_bases, owners))
    return [
        {"index": i, "conversation_id": c, "token": t} for i, (c, t) in enumerate(zip(conversations, owners))
    ]


# ---------------------------------------------------------------------------
# One measurement
# ---------------------------------------------------------------------------


def _client_process(queue: multiprocessing.Queue, jobs: list[dict], kwargs: dict) -> None:
    """A client process' entry point: its runs' results go back on ``queue``."""
    queue.put(run_clients(jobs, **kwargs))


def drive(
    jobs: list[dict],
    *,
    procs: int,
    http_bases: list[str],
    ws_bases: list[str],
    ramp_s: float,
    give_up_s: float,
    lead_s: float = 3.0,
) -> tuple[list[dict], float, float]:
    """Run ``jobs`` from ``procs`` client processes starting together; their
    results, the common start time, and the client processes' CPU seconds."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    start_at = time.time() + lead_s
    kwargs = {
        "http_bases": http_bases,
        "ws_bases": ws_bases,
        "model": MODEL,
        "start_at": start_at,
        "ramp_s": ramp_s,
        "total": len(jobs),
        "give_up_s": give_up_s,
    }
    procs = max(1, min(procs, len(jobs)))
    workers = [
        context.Process(target=_client_process, args=(queue, jobs[k::procs], kwargs), daemon=True)
        for k in range(procs)
    ]
    for worker in workers:
        worker.start()
    results: list[dict] = []
    cpu_s = 0.0
    for _ in workers:
        answer = queue.get(timeout=give_up_s + ramp_s + lead_s + 120)
        results.extend(answer["results"])
        cpu_s += answer["cpu_s"]
    for worker in workers:
        worker.join(10)
    return results, start_at, cpu_s


def _ms(values: list[float], p: float) -> float:
    return round(percentile(values, p), 1)


def summarize(results: list[dict], *, chunks: int, start_at: float, provider: dict) -> dict:
    """What the clients saw: completion, seqs and chunks lost or repeated,
    latencies (``relay``: provider emit → websocket receipt, for chunks
    emitted after their socket opened), events per token."""
    completed = [r for r in results if r["terminal"] == "run.completed"]
    ttfe = [(r["first_delta_at"] - r["posted_at"]) * 1000 for r in results if r["first_delta_at"]]
    post = [(r["accepted_at"] - r["posted_at"]) * 1000 for r in results if r["accepted_at"]]
    accept_to_first = [
        (r["first_delta_at"] - r["accepted_at"]) * 1000 for r in results if r["first_delta_at"]
    ]
    relay = [v for r in results for v in r["relay_ms"]]
    catchup = [v for r in results for v in r.get("catchup_ms", [])]
    publish = [v for r in results for v in r["publish_ms"]]
    lost = repeated = chunk_lost = chunk_repeated = out_of_order = 0
    sockets_with_gaps = 0
    for r in results:
        seqs = r["seqs"]
        distinct = set(seqs)
        run_lost = len(set(range(1, max(seqs, default=0) + 1)) - distinct)
        run_repeated = len(seqs) - len(distinct)
        lost += run_lost
        repeated += run_repeated
        out_of_order += sum(1 for a, b in itertools.pairwise(seqs) if b <= a)
        if r["run_id"]:
            chunk_lost += len(set(range(chunks)) - set(r["chunks"]))
            chunk_repeated += len(r["chunks"]) - len(set(r["chunks"]))
        sockets_with_gaps += bool(run_lost or run_repeated)
    ends = [r["last_delta_at"] for r in results if r["last_delta_at"]]
    # Runs streaming at once: the provider's own record of its streams.
    edges = []
    for start, end in provider["streams"]:
        if start >= start_at - 0.5:
            edges += [(start, 1), (end or math.inf, -1)]
    streaming = peak_streaming = 0
    for _, step in sorted(edges):
        streaming += step
        peak_streaming = max(peak_streaming, streaming)
    chunks_received = len(relay) + len(catchup)
    # Relay latency second by second (by emit time): a start-up burst and
    # a steady state look different, and one p99 hides which it was.
    by_second: dict[int, list[float]] = {}
    for r in results:
        for at, ms in zip(r["relay_at"], r["relay_ms"], strict=True):
            by_second.setdefault(int(at - start_at), []).append(ms)
    timeline = [
        [second, len(values), _ms(values, 50), _ms(values, 99)]
        for second, values in sorted(by_second.items())
    ]
    # Relay once every run streams: chunks emitted after the last run's first
    # delta arrived and before the first run's last one (the steady state,
    # without the admission of a burst or the runs ending).
    firsts = [r["first_delta_at"] for r in results if r["first_delta_at"]]
    all_streaming = (max(firsts, default=0.0), min(ends, default=0.0))
    steady = [
        ms for r in results for at, ms in zip(r["relay_at"], r["relay_ms"], strict=True)
        if all_streaming[0] <= at <= all_streaming[1]
    ]
    deltas = sum(r.get("deltas", 0) for r in results)
    return {
        "runs": len(results),
        "completed": len(completed),
        "not_completed": len(results) - len(completed),
        "terminal_events": dict(Counter(r["terminal"] or "none" for r in results)),
        "post_errors": dict(
            Counter(f"{r['post_status']} {r['post_error'][:60]}" for r in results if r["post_error"])
        ),
        "close_codes": dict(Counter(str(r["close_code"]) for r in results if r["run_id"])),
        "close_errors": dict(Counter(r["close_error"][:80] for r in results if r["close_error"])),
        "seq_lost": lost,
        "seq_repeated": repeated,
        "seq_out_of_order": out_of_order,
        "sockets_with_lost_or_repeated": sockets_with_gaps,
        "chunks_lost": chunk_lost,
        "chunks_repeated": chunk_repeated,
        "snapshots": sum(r["snapshots"] for r in results),
        "ttfe_p50_ms": _ms(ttfe, 50),
        "ttfe_p95_ms": _ms(ttfe, 95),
        "ttfe_p99_ms": _ms(ttfe, 99),
        "ttfe_max_ms": round(max(ttfe, default=0.0), 1),
        "post_p50_ms": _ms(post, 50),
        "post_p99_ms": _ms(post, 99),
        "accepted_to_first_delta_p50_ms": _ms(accept_to_first, 50),
        "accepted_to_first_delta_p99_ms": _ms(accept_to_first, 99),
        "relay_p50_ms": _ms(relay, 50),
        "relay_p95_ms": _ms(relay, 95),
        "relay_p99_ms": _ms(relay, 99),
        "relay_max_ms": round(max(relay, default=0.0), 1),
        "relay_all_streaming_p50_ms": _ms(steady, 50),
        "relay_all_streaming_p99_ms": _ms(steady, 99),
        "relay_all_streaming_chunks": len(steady),
        "provider_to_publish_p50_ms": _ms(publish, 50),
        "provider_to_publish_p99_ms": _ms(publish, 99),
        "chunks_received": chunks_received,
        "delta_events_received": deltas,
        "events_per_token": round(deltas / chunks_received, 3) if chunks_received else 0.0,
        "chunks_caught_up": len(catchup),
        "catchup_p99_ms": _ms(catchup, 99),
        "peak_streaming": peak_streaming,
        "all_done_s": round(max(ends, default=start_at) - start_at, 1),
        "provider_chunk_lag_p99_ms": round(provider["chunk_lag_p99_ms"], 1),
        "provider_abandoned": provider["abandoned"],
        "relay_by_second": timeline,  # [second after start, chunks, p50 ms, p99 ms]
    }


def db_pool_env(setting: str) -> dict[str, str]:
    """``--db-pool``: "off" (one persistent connection per thread), a size
    ("20": each process' psycopg pool holds at most 20), or "" (the settings' defaults)."""
    if not setting:
        return {}
    if setting == "off":
        return {"DATABASE_POOL": "false"}
    return {"DATABASE_POOL": "true", "DATABASE_POOL_MAX_SIZE": setting}


# Process kinds whose CPU per relayed token is reported: the LLM workers
# (llm, llm2 …), the processes serving the sockets, the web processes.
def process_kind(name: str) -> str:
    return name.rstrip("0123456789") or name


@dataclass
class Stack:
    """The real stack of one ``--pool`` option, started once for all levels."""

    option: str
    processes: list[Process]
    http_bases: list[str]
    ws_bases: list[str]
    tokens: list[str]  # API tokens of users not used yet (5 runs each)
    database_url: str
    log_dir: Path

    def take_users(self, runs: int) -> list[str]:
        count = math.ceil(runs / RUNS_PER_USER)
        taken, self.tokens = self.tokens[:count], self.tokens[count:]
        return taken


def start_stack(
    option: str,
    args: argparse.Namespace,
    *,
    pg: PrivatePostgres,
    redis_server: PrivateRedis,
    provider_url: str,
    users: int,
) -> Stack:
    pool, _, concurrency = option.partition(":")
    concurrency = int(concurrency or 64)
    redis_url = redis_server.url(0)
    database_url = fresh_database(pg=pg.url("postgres").rsplit("/", 1)[0], name=DB_NAME, redis_url=redis_url)
    env = base_env(
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        DJANGO_SECRET_KEY=SECRET_KEY,
        CHATFORGE_SECRET_KEYS=TEST_SECRET_KEYS,
        OPENAI_BASE_URL=f"{provider_url}/v1",
        OPENAI_API_KEY="bench",
        CHATFORGE_LOG_LEVEL="WARNING",
        **db_pool_env(args.db_pool),
        **env_settings(args.env),
    )
    log_dir = Path(args.log_dir) / option.replace(":", "-")
    log_dir.mkdir(parents=True, exist_ok=True)
    tokens = make_tokens(users, option.replace(":", "-"), database_url, redis_url)
    processes: list[Process] = []
    try:
        # --llm N: the deployment's "one LLM worker per core" (a gevent
        # worker uses one core), each with the option's concurrency.
        for index in range(args.llm):
            name = "llm" if args.llm == 1 else f"llm{index + 1}"
            processes.append(
                launch_worker(
                    name, queues="llm,default", pool=pool, concurrency=concurrency, env=env, log_dir=log_dir
                )
            )
        for proc in processes:
            wait_for_worker(proc)
        processes.append(
            start_worker(
                "tools",
                queues="tools",
                pool="prefork",
                concurrency=args.tools_concurrency,
                env=env,
                log_dir=log_dir,
            )
        )
        ports = [free_port() for _ in range(args.web)]
        for index, port in enumerate(ports):
            processes.append(start_server(port=port, env=env, log_dir=log_dir, name=f"web{index + 1}"))
        # Run sockets on processes of their own (--ws), as a deployment can
        # route /ws/ to them, or on the web processes with the POSTs.
        ws_ports = [free_port() for _ in range(args.ws)]
        for index, port in enumerate(ws_ports):
            processes.append(start_server(port=port, env=env, log_dir=log_dir, name=f"ws{index + 1}"))
    except BaseException:
        for proc in reversed(processes):
            proc.stop(30)
        raise
    return Stack(
        option=option,
        processes=processes,
        http_bases=[f"http://127.0.0.1:{p}" for p in ports],
        ws_bases=[f"ws://127.0.0.1:{p}" for p in (ws_ports or ports)],
        tokens=tokens,
        database_url=database_url,
        log_dir=log_dir,
    )


def warm_up(stack: Stack, args: argparse.Namespace) -> None:
    """A first wave: connections opened, code paths run, caches filled."""
    if not args.warmup:
        return
    jobs = jobs_for(args.warmup, stack.take_users(args.warmup), stack.http_bases)
    warm, _, _ = drive(
        jobs,
        procs=1,
        http_bases=stack.http_bases,
        ws_bases=stack.ws_bases,
        ramp_s=1.0,
        give_up_s=args.give_up,
        lead_s=1.0,
    )
    done = sum(r["terminal"] == "run.completed" for r in warm)
    print(f"[{stack.option}] warm-up: {done}/{len(warm)} completed", file=sys.stderr)
    time.sleep(1.0)


def measure_level(
    stack: Stack,
    runs: int,
    args: argparse.Namespace,
    *,
    pg: PrivatePostgres,
    redis_server: PrivateRedis,
    provider_url: str,
) -> dict:
    """``runs`` runs started at once (or over ``--ramp``), each followed on
    its own socket, with every process sampled meanwhile."""
    jobs = jobs_for(runs, stack.take_users(runs), stack.http_bases)
    pids = {p.name: p.popen.pid for p in stack.processes}
    pids["provider"] = args.provider_pid
    pids["postgres"] = int((pg.data / "postmaster.pid").read_text().split()[0])
    pids["redis"] = redis_server.popen.pid
    sampler = Sampler(
        pids,
        {
            "postgres": pg.port,
            "redis": redis_server.port,
            "provider": int(provider_url.rsplit(":", 1)[1]),
        },
        pg.url("postgres"),
    )
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    busy_start = machine_busy()
    sampler.start()
    profilers = start_profilers(stack.processes, stack.log_dir, args.profile, runs) if args.profile else []
    results, start_at, client_cpu_s = drive(
        jobs,
        procs=args.client_procs,
        http_bases=stack.http_bases,
        ws_bases=stack.ws_bases,
        ramp_s=args.ramp,
        give_up_s=args.give_up,
    )
    sampler.stop()
    busy_end = machine_busy()
    for profiler in profilers:
        profiler.wait(60)
    stats = httpx.get(f"{provider_url}/stats", params={"since": start_at - 0.5}, timeout=30).json()
    with psycopg.connect(stack.database_url) as conn:
        rows = conn.execute("SELECT status, count(*) FROM conversations_run GROUP BY 1").fetchall()
        run_status = dict(rows)
    logs = "".join(p.log() for p in stack.processes)

    window = busy_end[1] - busy_start[1]
    ours = sum(s.cpu_end - s.cpu_start for s in sampler.stats.values()) + client_cpu_s
    summary = summarize(results, chunks=args.tokens, start_at=start_at, provider=stats)
    processes = {
        name: {
            "peak_rss_mb": round(s.peak_rss / 2**20, 1),
            "peak_threads": s.peak_threads,
            "peak_connections": dict(s.peak_conns),
            "cpu_s": round(s.cpu_end - s.cpu_start, 2),
        }
        for name, s in sampler.stats.items()
    }
    cpu_by_kind: Counter = Counter()
    for name, stats_ in processes.items():
        cpu_by_kind[process_kind(name)] += stats_["cpu_s"]
    cpu_by_kind["clients"] = client_cpu_s
    received = summary["chunks_received"] or 1
    return {
        "option": stack.option,
        "level": runs,
        **summary,
        "db_run_status": run_status,
        "processes": processes,
        "cpu_us_per_token": {kind: round(cpu * 1e6 / received) for kind, cpu in sorted(cpu_by_kind.items())},
        "pg_stat_activity_peak": sampler.pg_peak_total,
        "pg_stat_activity_peak_by_state": dict(sampler.pg_peak),
        "window_s": round(window / os.cpu_count(), 1),
        "machine_cpu_busy_s": round(busy_end[0] - busy_start[0], 1),
        "stack_cpu_s": round(ours, 1),
        "clients_cpu_s": round(client_cpu_s, 1),
        "server_errors": {
            "Traceback": logs.count("Traceback"),
            "Exception in ASGI application": logs.count("Exception in ASGI application"),
            "too many clients": logs.count("too many clients"),
        },
        "log_dir": str(stack.log_dir),
        "loadavg_before": load_before,
    }


def start_profilers(
    processes: list[Process], log_dir: Path, seconds: float, level: int
) -> list[subprocess.Popen]:
    """py-spy (if installed) samples the web and LLM worker processes for the
    first ``seconds`` of the load; the output is in the log directory.

    ``--gil`` keeps only the thread holding the interpreter: without it a
    thread waiting for the GIL is sampled at the line it stopped on, and a
    cheap line can show as a tenth of the process' time."""
    py_spy = Path(sys.executable).with_name("py-spy")
    if not py_spy.exists():
        print("py-spy is not installed; no profiles", file=sys.stderr)
        return []
    return [
        subprocess.Popen(
            [
                str(py_spy),
                "record",
                "--pid",
                str(p.popen.pid),
                "--duration",
                str(int(seconds)),
                "--rate",
                "200",
                "--format",
                "raw",
                "--nonblocking",
                "--gil",
                "--output",
                str(log_dir / f"profile-{p.name}-c{level}.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for p in processes
        if p.name.startswith(("web", "ws", "llm"))
    ]


def table(reports: list[dict]) -> str:
    rows = [
        ("completed / runs", lambda r: f"{r['completed']} / {r['runs']}"),
        (
            "lost / repeated seq (chunks)",
            lambda r: f"{r['seq_lost']} / {r['seq_repeated']} ({r['chunks_lost']} / {r['chunks_repeated']})",
        ),
        ("close codes", lambda r: ", ".join(f"{k}×{v}" for k, v in r["close_codes"].items())),
        (
            "relay p50 / p95 / p99 / max",
            lambda r: f"{r['relay_p50_ms']:.0f} / {r['relay_p95_ms']:.0f} / {r['relay_p99_ms']:.0f} / "
            f"{r['relay_max_ms']:.0f} ms",
        ),
        (
            "  while every run streams: p50 / p99 (chunks)",
            lambda r: f"{r.get('relay_all_streaming_p50_ms', 0):.0f} / "
            f"{r.get('relay_all_streaming_p99_ms', 0):.0f} ms ({r.get('relay_all_streaming_chunks', 0)})",
        ),
        (
            "  provider → publish p50 / p99",
            lambda r: f"{r['provider_to_publish_p50_ms']:.0f} / {r['provider_to_publish_p99_ms']:.0f} ms",
        ),
        (
            "  chunks emitted before their socket opened, sent on connect (p99 after emit)",
            lambda r: f"{r['chunks_caught_up']} ({r['catchup_p99_ms']:.0f} ms)",
        ),
        (
            "time to first event p50 / p95 / p99",
            lambda r: f"{r['ttfe_p50_ms']:.0f} / {r['ttfe_p95_ms']:.0f} / {r['ttfe_p99_ms']:.0f} ms",
        ),
        ("  POST → 202 p50 / p99", lambda r: f"{r['post_p50_ms']:.0f} / {r['post_p99_ms']:.0f} ms"),
        (
            "  202 → first delta p50 / p99",
            lambda r: (
                f"{r['accepted_to_first_delta_p50_ms']:.0f} / {r['accepted_to_first_delta_p99_ms']:.0f} ms"
            ),
        ),
        (
            "tokens relayed, delta events per token",
            lambda r: f"{r['chunks_received']}, {r['events_per_token']:.2f}",
        ),
        ("peak runs streaming at once", lambda r: str(r["peak_streaming"])),
        ("last delta after start", lambda r: f"{r['all_done_s']} s"),
        ("provider's own lateness p99", lambda r: f"{r['provider_chunk_lag_p99_ms']:.0f} ms"),
        ("pg_stat_activity peak", lambda r: str(r["pg_stat_activity_peak"])),
    ]
    kinds = sorted({k for r in reports for k in r["cpu_us_per_token"]})
    rows.append(
        (
            "CPU µs per relayed token: " + ", ".join(kinds),
            lambda r: ", ".join(str(r["cpu_us_per_token"].get(k, 0)) for k in kinds),
        )
    )
    names = sorted({n for r in reports for n in r["processes"]})
    for name in names:
        rows.append(
            (
                f"{name}: Postgres / Redis conns",
                lambda r, n=name: "{} / {}".format(
                    r["processes"].get(n, {}).get("peak_connections", {}).get("postgres", 0),
                    r["processes"].get(n, {}).get("peak_connections", {}).get("redis", 0),
                ),
            )
        )
        rows.append(
            (
                f"{name}: RSS peak, threads, CPU s",
                lambda r, n=name: "{} MB, {}, {}".format(
                    r["processes"].get(n, {}).get("peak_rss_mb", 0),
                    r["processes"].get(n, {}).get("peak_threads", 0),
                    r["processes"].get(n, {}).get("cpu_s", 0),
                ),
            )
        )
    rows.append(
        (
            "machine CPU busy / benchmark's CPU (window × cores)",
            lambda r: (
                f"{r['machine_cpu_busy_s']} / {r['stack_cpu_s']} s ({r['window_s']} s × {os.cpu_count()})"
            ),
        )
    )
    lines = [
        "| measure | " + " | ".join(f"{r['option']}, {r['level']} runs" for r in reports) + " |",
        "|---|" + "---|" * len(reports),
    ]
    lines += [f"| {label} | " + " | ".join(fn(r) for r in reports) + " |" for label, fn in rows]
    return "\n".join(lines)


def parse_levels(text: str) -> list[int]:
    """``--runs 1,20,100``: the levels measured one after another."""
    levels = [int(part) for part in text.split(",") if part.strip()]
    if not levels or any(level < 1 for level in levels):
        raise argparse.ArgumentTypeError("--runs takes run counts ≥ 1, comma-separated (e.g. 1,20,100)")
    return [min(level, MAX_RUNS) for level in levels]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=parse_levels, default=[100],
        help="concurrent runs; several levels comma-separated, measured in turn on one stack (1,20,100)",
    )
    parser.add_argument(
        "--pool", action="append", help="LLM worker pool:concurrency, repeatable (default gevent:1000)"
    )
    parser.add_argument("--llm", type=int, default=1, help="LLM worker processes, each with the pool's -c")
    parser.add_argument("--web", type=int, default=1, help="web processes (runs spread over them)")
    parser.add_argument("--ws", type=int, default=0,
                        help="processes serving only the run sockets (0: the web processes serve them)")
    parser.add_argument("--tokens-per-s", type=float, default=50.0,
                        help="the model's pace: one SSE chunk per token, this many a second")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds each answer streams")
    parser.add_argument(
        "--ramp", type=float, default=0.0, help="spread the runs' starts over this many seconds"
    )
    parser.add_argument("--warmup", type=int, default=20, help="runs before the measured ones")
    parser.add_argument("--client-procs", type=int, default=2)
    parser.add_argument("--tools-concurrency", type=int, default=2)
    parser.add_argument("--pg-max-connections", type=int, default=1500)
    parser.add_argument(
        "--db-pool", default="", help='"off", a pool size per process, or "" for the defaults'
    )
    add_env_argument(parser)
    parser.add_argument("--give-up", type=float, default=180.0)
    parser.add_argument(
        "--profile", type=float, default=0.0, help="py-spy the web and LLM processes this long at each level"
    )
    parser.add_argument(
        "--log-dir", default="", help="process logs and profiles (default: a new temporary directory)"
    )
    parser.add_argument("--json", default="", help="also write the reports to this file")
    args = parser.parse_args()
    args.tokens = max(2, round(args.tokens_per_s * args.duration))
    args.log_dir = args.log_dir or tempfile.mkdtemp(prefix="chatforge-load-")
    Path(args.log_dir).mkdir(parents=True, exist_ok=True)
    options = args.pool or ["gevent:1000"]

    provider_port = free_port()
    provider = start_process(
        "provider",
        [
            sys.executable,
            "-m",
            "bench.load_provider",
            "--port",
            str(provider_port),
            "--tokens",
            str(args.tokens),
            "--tokens-per-s",
            str(args.tokens_per_s),
        ],
        base_env(),
        Path(args.log_dir),
    )
    args.provider_pid = provider.popen.pid
    provider_url = f"http://127.0.0.1:{provider_port}"
    users = math.ceil(args.warmup / RUNS_PER_USER) + sum(math.ceil(n / RUNS_PER_USER) for n in args.runs)
    reports = []
    try:
        wait_for(
            lambda: "load provider on" in provider.log(),
            timeout=30,
            what="the load provider",
            process=provider,
        )
        with private_postgres(max_connections=args.pg_max_connections) as pg, private_redis() as redis_server:
            for option in options:
                stack = start_stack(
                    option, args, pg=pg, redis_server=redis_server, provider_url=provider_url, users=users
                )
                try:
                    warm_up(stack, args)
                    for runs in args.runs:
                        report = measure_level(
                            stack, runs, args, pg=pg, redis_server=redis_server, provider_url=provider_url
                        )
                        reports.append(report)
                        print(json.dumps(report, indent=2), flush=True)
                        time.sleep(2.0)  # the last runs' finalize and sockets closing
                finally:
                    for proc in reversed(stack.processes):
                        proc.stop(30)
    finally:
        provider.stop()
    header = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "runs": args.runs,
        "tokens_per_s": args.tokens_per_s,
        "tokens": args.tokens,
        "duration_s": args.duration,
        "ramp_s": args.ramp,
        "llm": args.llm,
        "web": args.web,
        "ws": args.ws,
        "client_procs": args.client_procs,
        "db_pool": args.db_pool or "default",
        "env": args.env,
    }
    print(json.dumps(header))
    print(table(reports))
    if args.json:
        Path(args.json).write_text(json.dumps({"header": header, "reports": reports}, indent=2))


if __name__ == "__main__":
    main()
