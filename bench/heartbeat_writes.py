"""Heartbeat writes at 500 concurrent steps: what keeping running steps
alive costs Postgres and Redis, `python -m bench.heartbeat_writes`
(``make bench-heartbeat``).

The question (issue 38): worker liveness moved into Redis must keep the
database load flat, with no per-step database write per heartbeat at 500
concurrent steps. So this holds ``--steps`` model turns running at once
and counts, from outside the processes, what the stack writes while
nothing but the steps' upkeep happens:

- a private Postgres (``pg_stat_statements`` loaded) and a private Redis,
  a fresh database, ``--llm`` gevent LLM workers of ``--concurrency``
  each, and one web process through which the runs are posted
  (``POST …/messages/``, as ``bench/load.py`` and ``bench/fairness.py``);
- the model is the load provider (``bench/load_provider.py``) told to stay
  silent for ``--quiet`` seconds after its first (empty) chunk: every turn
  is claimed and inside its step lease, waiting on the model, and no token
  is streamed during the measured window, so nothing has to be subtracted
  for streaming (the provider's own record says no chunk was written in
  the window, and the run is refused as unmeasured otherwise);
- an idle window (the same stack, no step running) and then the window
  with every step running, each ``--window`` seconds, a multiple of
  CHATFORGE_HEARTBEAT_S (10 s) so that each process renews its leases the
  same number of times whatever the phase of its timer.

Counted over each window: rows updated per table
(``pg_stat_user_tables.n_tup_upd``), statements executed and UPDATE
statements that set ``heartbeat_at`` (``pg_stat_statements`` calls),
transactions committed (``pg_stat_database.xact_commit``), and Redis
commands (``INFO``'s ``total_commands_processed`` and ``commandstats``;
Redis counts the commands a script runs as well as the script's own
EVALSHA, so one liveness renewal, a single round trip, counts as 4–5).
Every read of the counters is made so that it adds nothing to what it
counts: the transaction and statement counters are read from another
database than the stack's, the table counters (which only writes change)
from the stack's, and the benchmark's own INFO (the start reading's) is taken off.
Postgres backends report their table and transaction counters late (a
backend that reported less than a second ago defers its report; seen
here: the 500 claims' counts were reported up to the first heartbeat after
them, over 10 s later), so each window follows ``--settle`` seconds (30,
three heartbeats) of the same state and measures a steady state: what
leaks in at its start from before is what leaks out at its end.
``pg_stat_statements`` counts as each statement ends, exactly,
and its ``rows`` also gives the rows the heartbeat UPDATEs changed.

Prints a table (idle, with the steps running, the difference) and writes
nothing into the repository; ``--json FILE`` also writes the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psycopg
import redis

from bench.load import make_tokens
from bench.services import SECRET_KEY, add_env_argument, env_settings, fresh_database, post_runs
from tests.support.private_services import PrivatePostgres, private_redis
from tests.support.stack import (
    ROOT,
    TEST_SECRET_KEYS,
    Process,
    base_env,
    free_port,
    launch_worker,
    start_process,
    start_server,
    wait_for,
    wait_for_worker,
)

DB_NAME = "chatforge_heartbeat"
MODEL = "bench-load"
TABLES = ("conversations_llmturn", "conversations_toolinvocation", "conversations_run")
HEARTBEAT_S = 10  # CHATFORGE_HEARTBEAT_S's default, which the stack keeps


# ---------------------------------------------------------------------------
# Counters, read from outside the stack's processes
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Counters:
    """One reading of every counter, and when it was taken."""

    at: float  # monotonic
    rows_updated: dict[str, int]  # table -> n_tup_upd
    xact_commit: int
    statements: int  # pg_stat_statements calls, every statement of the stack's database
    heartbeat_updates: int  # calls of UPDATE statements that set heartbeat_at
    updates: int  # calls of every UPDATE statement
    heartbeat_rows: dict[str, int]  # table -> rows those heartbeat UPDATEs changed (pg_stat_statements)
    redis_commands: int
    redis_calls: dict[str, int]  # command -> calls (commandstats)


class CounterReader:
    """Reads the counters in an order that keeps the reads out of the counts.

    At a window's start the table counters are read first (from the stack's
    database: a read changes no ``n_tup_upd``), then the transaction and
    statement counters (from the ``postgres`` database, whose transactions
    and statements are not the stack's), then Redis; at its end the same in
    reverse, so no read of ours into the stack's database falls between
    the two readings of its transaction counter."""

    def __init__(self, *, stack_db: str, admin_db: str, redis_url: str) -> None:
        self._stack = psycopg.connect(stack_db, autocommit=True)
        self._admin = psycopg.connect(admin_db, autocommit=True)
        self._redis = redis.Redis.from_url(redis_url)
        self._dbname = stack_db.rsplit("/", 1)[1]

    def close(self) -> None:
        self._stack.close()
        self._admin.close()
        self._redis.close()

    def _tables(self) -> dict[str, int]:
        rows = self._stack.execute(
            "SELECT relname, n_tup_upd FROM pg_stat_user_tables WHERE relname = ANY(%s)", (list(TABLES),)
        ).fetchall()
        found = dict(rows)
        return {table: int(found.get(table, 0)) for table in TABLES}

    def _database(self) -> tuple[int, int, int, int, dict[str, int]]:
        (xact,) = self._admin.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (self._dbname,)
        ).fetchone()
        rows = self._admin.execute(
            "SELECT s.query ILIKE 'UPDATE%%', s.query ILIKE '%%heartbeat_at%%', "
            "substring(s.query from '^UPDATE \"?([A-Za-z_]+)'), sum(s.calls), sum(s.rows) "
            "FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = %s "
            "GROUP BY 1, 2, 3",
            (self._dbname,),
        ).fetchall()
        statements = sum(int(calls) for *_, calls, _ in rows)
        updates = sum(int(calls) for update, _, _, calls, _ in rows if update)
        heartbeats = sum(int(calls) for update, beat, _, calls, _ in rows if update and beat)
        beat_rows = {table: int(count) for update, beat, table, _, count in rows if update and beat and table}
        return int(xact), statements, heartbeats, updates, beat_rows

    def _redis_info(self) -> tuple[int, dict[str, int]]:
        info = self._redis.info("all")  # one command: the stats and the commandstats together
        calls = {key[len("cmdstat_"):]: int(value["calls"]) for key, value in info.items()
                 if key.startswith("cmdstat_")}
        return int(info["total_commands_processed"]), calls

    def start(self) -> Counters:
        tables = self._tables()
        xact, statements, heartbeats, updates, beat_rows = self._database()
        commands, calls = self._redis_info()
        return Counters(time.monotonic(), tables, xact, statements, heartbeats, updates, beat_rows,
                        commands, calls)

    def end(self) -> Counters:
        commands, calls = self._redis_info()
        at = time.monotonic()
        xact, statements, heartbeats, updates, beat_rows = self._database()
        tables = self._tables()
        return Counters(at, tables, xact, statements, heartbeats, updates, beat_rows, commands, calls)


def rates(start: Counters, end: Counters) -> dict:
    """Per-second rates over the window between two readings; the
    benchmark's own INFO (the start reading's, counted by the end one) is
    taken off the Redis counts."""
    seconds = end.at - start.at
    calls = {name: end.redis_calls.get(name, 0) - start.redis_calls.get(name, 0)
             for name in set(end.redis_calls) | set(start.redis_calls)}
    calls["info"] = calls.get("info", 0) - 1
    calls = {name: count for name, count in calls.items() if count}
    per_s = lambda count: round(count / seconds, 2)  # noqa: E731 - one expression, used a dozen times
    return {
        "window_s": round(seconds, 2),
        "rows_updated_per_s": {t: per_s(end.rows_updated[t] - start.rows_updated[t]) for t in TABLES},
        "rows_updated": {t: end.rows_updated[t] - start.rows_updated[t] for t in TABLES},
        "heartbeat_rows_per_s": {t: per_s(end.heartbeat_rows.get(t, 0) - start.heartbeat_rows.get(t, 0))
                                 for t in TABLES},
        "xact_commit_per_s": per_s(end.xact_commit - start.xact_commit),
        "statements_per_s": per_s(end.statements - start.statements),
        "update_statements_per_s": per_s(end.updates - start.updates),
        "heartbeat_updates": end.heartbeat_updates - start.heartbeat_updates,
        "heartbeat_updates_per_s": per_s(end.heartbeat_updates - start.heartbeat_updates),
        "redis_commands_per_s": per_s(end.redis_commands - start.redis_commands - 1),
        "redis_calls_per_s": {name: per_s(count)
                              for name, count in sorted(calls.items(), key=lambda kv: -kv[1])},
    }


# ---------------------------------------------------------------------------
# The stack and its load
# ---------------------------------------------------------------------------


def start_postgres(max_connections: int) -> PrivatePostgres:
    """A private cluster with ``pg_stat_statements`` loaded (it counts each
    statement as it ends, so the window's statements are exact)."""
    pg = PrivatePostgres(max_connections=max_connections).init()
    with open(pg.data / "postgresql.conf", "a") as conf:
        conf.write("shared_preload_libraries = 'pg_stat_statements'\n")
    return pg.start()


def provider_streams(provider_url: str, since: float) -> dict:
    return httpx.get(f"{provider_url}/stats", params={"since": since}, timeout=30).json()


def running_turns(database_url: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as conn:
        (count,) = conn.execute(
            "SELECT count(*) FROM conversations_llmturn WHERE status = 'running'").fetchone()
        return int(count)


def hold_window(seconds: float) -> None:
    """The measured window: the benchmark only waits (an event nobody sets,
    so nothing of ours runs meanwhile)."""
    threading.Event().wait(seconds)


def measure(args: argparse.Namespace, log_dir: Path) -> dict:
    provider_port = free_port()
    provider_url = f"http://127.0.0.1:{provider_port}"
    provider = start_process(
        "provider",
        [sys.executable, "-m", "bench.load_provider", "--port", str(provider_port), "--tokens", "2",
         "--tokens-per-s", "1", "--first-chunk", str(args.quiet)],
        base_env(), log_dir,
    )
    processes: list[Process] = []
    pg = start_postgres(args.pg_max_connections)
    try:
        with private_redis() as redis_server:
            wait_for(lambda: "load provider on" in provider.log(), timeout=30, what="the load provider",
                     process=provider)
            redis_url = redis_server.url(0)
            server_url = pg.url("postgres").rsplit("/", 1)[0]
            database_url = fresh_database(pg=server_url, name=DB_NAME, redis_url=redis_url)
            for db in (DB_NAME, "postgres"):
                pg.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements", db=db)
            env = base_env(
                DATABASE_URL=database_url, REDIS_URL=redis_url, DJANGO_SECRET_KEY=SECRET_KEY,
                CHATFORGE_SECRET_KEYS=TEST_SECRET_KEYS, OPENAI_BASE_URL=f"{provider_url}/v1",
                OPENAI_API_KEY="bench", CHATFORGE_LOG_LEVEL="WARNING",
                CHATFORGE_MAX_ACTIVE_RUNS_PER_USER="100000", CHATFORGE_MESSAGE_RATE="1000000/min",
                # The model is silent on purpose: it must not be given up on.
                CHATFORGE_LLM_IDLE_TIMEOUT_S=str(args.quiet + 120),
                **env_settings(args.env),
            )
            (token,) = make_tokens(1, "heartbeat", database_url, redis_url)
            for index in range(args.llm):
                processes.append(launch_worker(f"llm{index + 1}", queues="llm,default", pool="gevent",
                                               concurrency=args.concurrency, env=env, log_dir=log_dir))
            for proc in processes:
                wait_for_worker(proc)
            port = free_port()
            processes.append(start_server(port=port, env=env, log_dir=log_dir, name="web"))
            reader = CounterReader(stack_db=database_url, admin_db=pg.url("postgres"), redis_url=redis_url)
            try:
                return _measure_windows(args, reader, f"http://127.0.0.1:{port}", token, provider_url,
                                        database_url)
            finally:
                reader.close()
    finally:
        # The steps are still waiting on the model: no warm shutdown would end
        # them before the model's silence does, and nothing of them is kept.
        for proc in reversed(processes):
            if proc.name.startswith("llm"):
                proc.kill()
            else:
                proc.stop(30)
        provider.stop()
        pg.destroy()


def _measure_windows(args: argparse.Namespace, reader: CounterReader, base: str, token: str,
                     provider_url: str, database_url: str) -> dict:
    hold_window(args.settle)  # the start-up's counts reported first (--settle)
    load_idle = Path("/proc/loadavg").read_text().split()[:3]
    start = reader.start()
    hold_window(args.window)
    idle = rates(start, reader.end())

    posted_at = time.time()
    asyncio.run(post_runs(base, token, args.steps, model=MODEL, content="hold", timeout_s=120))

    def all_waiting() -> bool:
        open_streams = [s for s in provider_streams(provider_url, posted_at - 1)["streams"] if s[1] is None]
        return len(open_streams) >= args.steps and running_turns(database_url) >= args.steps

    wait_for(all_waiting, timeout=args.start_timeout, what=f"{args.steps} steps waiting on the model")
    held_from = time.time()
    hold_window(args.settle)  # the claims' counts reported first; the window is steady state
    load_held = Path("/proc/loadavg").read_text().split()[:3]
    start = reader.start()
    window_started = time.time()
    hold_window(args.window)
    held = rates(start, reader.end())
    window_ended = time.time()
    stats = provider_streams(provider_url, window_started)
    all_streams = provider_streams(provider_url, posted_at - 1)["streams"]
    still_open = sum(1 for s in all_streams if s[1] is None)
    still_running = running_turns(database_url)
    if stats["chunks_written"] or still_open < args.steps or still_running < args.steps:
        raise RuntimeError(f"the window was not clean: {stats['chunks_written']} chunks streamed, "
                           f"{still_open} streams open, {still_running} turns running (of {args.steps})")
    if posted_at + args.quiet < window_ended:
        raise RuntimeError("the model's silence ended before the window did: raise --quiet")
    return {
        "steps": args.steps,
        "steps_running_at_end": still_running,
        "streams_open_at_end": still_open,
        "chunks_streamed_in_window": stats["chunks_written"],
        "all_waiting_after_s": round(held_from - posted_at, 1),
        "loadavg_idle_window": load_idle,
        "loadavg_held_window": load_held,
        "loadavg_after": Path("/proc/loadavg").read_text().split()[:3],
        "idle": idle,
        "held": held,
    }


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------


def table(report: dict) -> str:
    idle, held = report["idle"], report["held"]
    rows: list[tuple[str, float, float]] = [
        (f"{t}: rows updated/s", idle["rows_updated_per_s"][t], held["rows_updated_per_s"][t]) for t in TABLES
    ]
    rows += [
        (f"  of which by heartbeat UPDATEs (pg_stat_statements): {t}", idle["heartbeat_rows_per_s"][t],
         held["heartbeat_rows_per_s"][t]) for t in TABLES
    ]
    rows += [
        ("UPDATE statements/s setting heartbeat_at", idle["heartbeat_updates_per_s"],
         held["heartbeat_updates_per_s"]),
        ("UPDATE statements/s, all", idle["update_statements_per_s"], held["update_statements_per_s"]),
        ("statements/s, all", idle["statements_per_s"], held["statements_per_s"]),
        ("transactions/s (xact_commit)", idle["xact_commit_per_s"], held["xact_commit_per_s"]),
        ("Redis commands/s (total_commands_processed)", idle["redis_commands_per_s"],
         held["redis_commands_per_s"]),
    ]
    for name in ("evalsha", "eval", "zadd", "info", "time", "exists", "set"):
        a, b = idle["redis_calls_per_s"].get(name, 0.0), held["redis_calls_per_s"].get(name, 0.0)
        if a or b:
            rows.append((f"  Redis {name}/s", a, b))
    steps = report["steps"]
    lines = [
        f"| measure | idle ({idle['window_s']} s) | {steps} steps running ({held['window_s']} s) "
        "| difference |",
        "|---|---|---|---|",
    ]
    lines += [f"| {label} | {a:g} | {b:g} | {round(b - a, 2):g} |" for label, a, b in rows]
    other = sorted(held["redis_calls_per_s"].items(), key=lambda kv: -kv[1])[:6]
    lines.append("")
    lines.append("Redis commands/s with the steps running, most called: "
                 + ", ".join(f"{name} {rate:g}" for name, rate in other))
    return "\n".join(lines)


def git_commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500, help="model turns held running at once")
    parser.add_argument("--window", type=float, default=40.0,
                        help="seconds of each measured window (a multiple of CHATFORGE_HEARTBEAT_S, 10 s)")
    parser.add_argument("--llm", type=int, default=2, help="gevent LLM worker processes")
    parser.add_argument("--concurrency", type=int, default=0,
                        help="each LLM worker's -c (default: --steps, so any split of the steps fits)")
    parser.add_argument("--quiet", type=float, default=240.0,
                        help="seconds the model stays silent after its first (empty) chunk")
    parser.add_argument("--start-timeout", type=float, default=150.0,
                        help="seconds to wait for every step to be waiting on the model")
    parser.add_argument("--settle", type=float, default=30.0,
                        help="seconds before each window, for earlier work's counts to be reported "
                             "(Postgres reports a backend's counts late: see the module's docstring)")
    parser.add_argument("--pg-max-connections", type=int, default=1200)
    add_env_argument(parser)
    parser.add_argument("--log-dir", default="", help="process logs (default: a new temporary directory)")
    parser.add_argument("--json", default="", help="also write the figures to this file")
    args = parser.parse_args()
    args.concurrency = args.concurrency or args.steps
    log_dir = Path(args.log_dir or tempfile.mkdtemp(prefix="chatforge-heartbeat-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    report = measure(args, log_dir)
    header = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "llm_workers": args.llm,
        "concurrency": args.concurrency,
        "window_s": args.window,
        "env": args.env,
        "log_dir": str(log_dir),
    }
    print(json.dumps({"header": header, **report}, indent=2))
    print(table(report))
    if args.json:
        Path(args.json).write_text(json.dumps({"header": header, **report}, indent=2))


if __name__ == "__main__":
    main()
