"""Fair scheduling: one user with a backlog of runs, another with a few:
`python -m bench.fairness` (``make bench-fairness``).

The question (issue: "the small user's runs start within one step's time,
not after the big user's backlog"): on a fleet of ``--slots`` LLM worker
slots, user *heavy* posts ``--heavy`` runs at once, then user *light* posts
``--light``. Each run is one model turn that streams for ``--step`` seconds
(the load provider, ``bench/load_provider.py``). Measured twice on fresh
databases, with the same processes: without caps, and with each user
capped at ``--cap`` running steps (CHATFORGE_USER_MAX_RUNNING_STEPS).

Reported per mode, from the ledger's own timestamps: each user's wait from
POST to its run's first turn starting (p50 / max), when the light user's
last run finished, and when the heavy user's last run finished (the
backlog's makespan: a cap is a cap, so a user alone on the fleet gets only
its cap's worth of slots). Writes its section of docs/performance.md
(``--no-write``: print only).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from bench.load import make_tokens
from bench.services import SECRET_KEY, fresh_database, percentile, post_runs
from tests.support.private_services import private_postgres, private_redis
from tests.support.stack import (
    ROOT,
    TEST_SECRET_KEYS,
    Process,
    base_env,
    free_port,
    start_process,
    start_server,
    start_worker,
    wait_for,
)

DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- fairness:begin -->", "<!-- fairness:end -->"
DB_NAME = "chatforge_fairness"


def _wait_all_done(database_url: str, run_ids: list[str], give_up_s: float) -> None:
    deadline = time.monotonic() + give_up_s
    with psycopg.connect(database_url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            done = conn.execute(
                "SELECT count(*) FROM conversations_run WHERE id = ANY(%s) "
                "AND status IN ('completed', 'failed', 'cancelled')", (run_ids,)).fetchone()[0]
            if done == len(run_ids):
                return
            time.sleep(0.5)
    raise TimeoutError(f"runs not finished after {give_up_s} s")


def _timings(database_url: str, run_ids: list[str], zero: float) -> dict:
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(
            """SELECT r.status, extract(epoch FROM r.created_at), extract(epoch FROM t.started_at),
                      extract(epoch FROM r.finished_at)
               FROM conversations_run r JOIN conversations_llmturn t ON t.run_id = r.id AND t.iteration = 0
               WHERE r.id = ANY(%s)""", (run_ids,)).fetchall()
    waits = [float(started) - float(created) for _, created, started, _ in rows]
    return {
        "runs": len(rows),
        "completed": sum(1 for status, *_ in rows if status == "completed"),
        "wait_p50_s": round(percentile(waits, 50), 3),
        "wait_max_s": round(max(waits), 3),
        "last_finished_s": round(max(float(finished) for *_, finished in rows) - zero, 2),
    }


def measure(mode: str, cap: int, args: argparse.Namespace, *, pg_url: str, redis_url: str,
            provider_url: str, log_dir: Path) -> dict:
    database_url = fresh_database(pg=pg_url, name=DB_NAME, redis_url=redis_url)
    env = base_env(
        DATABASE_URL=database_url, REDIS_URL=redis_url, DJANGO_SECRET_KEY=SECRET_KEY,
        CHATFORGE_SECRET_KEYS=TEST_SECRET_KEYS, OPENAI_BASE_URL=f"{provider_url}/v1", OPENAI_API_KEY="bench",
        CHATFORGE_LOG_LEVEL="WARNING", CHATFORGE_MAX_ACTIVE_RUNS_PER_USER="10000",
        CHATFORGE_MESSAGE_RATE="100000/min", CHATFORGE_USER_MAX_RUNNING_STEPS=str(cap),
    )
    heavy, light = make_tokens(2, mode, database_url, redis_url)
    port = free_port()
    processes: list[Process] = []
    mode_dir = log_dir / mode
    mode_dir.mkdir(parents=True, exist_ok=True)
    try:
        processes.append(start_worker("llm", queues="llm,default", pool="gevent", concurrency=args.slots,
                                      env=env, log_dir=mode_dir))
        processes.append(start_server(port=port, env=env, log_dir=mode_dir))
        base = f"http://127.0.0.1:{port}"
        zero = time.time()
        heavy_runs = asyncio.run(post_runs(base, heavy, args.heavy, model="bench-load", content="go"))
        light_runs = asyncio.run(post_runs(base, light, args.light, model="bench-load", content="go"))
        _wait_all_done(database_url, heavy_runs + light_runs, give_up_s=args.give_up)
        return {"mode": mode, "cap": cap, "heavy": _timings(database_url, heavy_runs, zero),
                "light": _timings(database_url, light_runs, zero)}
    finally:
        for proc in reversed(processes):
            proc.stop()


def start_provider(step_s: float, log_dir: Path) -> tuple[Process, str]:
    port = free_port()
    proc = start_process("provider", [sys.executable, "-m", "bench.load_provider", "--port", str(port),
                                      "--duration", str(step_s), "--chunks", "10"], base_env(), log_dir)
    wait_for(lambda: "load provider on" in proc.log(), timeout=30, what="the load provider", process=proc)
    return proc, f"http://127.0.0.1:{port}"


def table(reports: list[dict], args: argparse.Namespace) -> str:
    lines = [
        f"{args.slots} LLM worker slots (gevent); user *heavy* posts {args.heavy} runs, then user *light* "
        f"posts {args.light}; each run is one model turn streaming for {args.step} s.",
        "",
        "| mode | light: wait to start p50 / max | light: last run done | heavy: wait p50 / max "
        "| heavy: last run done (makespan) | completed |",
        "|---|---|---|---|---|---|",
    ]
    for r in reports:
        h, li = r["heavy"], r["light"]
        mode = "no caps" if r["cap"] == 0 else f"{r['cap']} running steps per user"
        lines.append(
            f"| {mode} | {li['wait_p50_s']} s / {li['wait_max_s']} s | {li['last_finished_s']} s "
            f"| {h['wait_p50_s']} s / {h['wait_max_s']} s | {h['last_finished_s']} s "
            f"| {h['completed'] + li['completed']}/{h['runs'] + li['runs']} |")
    return "\n".join(lines)


def write_doc(text: str) -> None:
    doc = DOC.read_text()
    section = f"{BEGIN}\n{text}\n{END}"
    if BEGIN in doc:
        doc = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: section, doc, flags=re.S)
    else:
        doc += f"\n## Fair scheduling: a backlog does not hold up other users\n\n`make bench-fairness` " \
               f"(bench/fairness.py).\n\n{section}\n"
    DOC.write_text(doc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, default=8, help="the LLM worker's gevent concurrency")
    parser.add_argument("--heavy", type=int, default=200)
    parser.add_argument("--light", type=int, default=5)
    parser.add_argument("--step", type=float, default=1.0, help="seconds each model turn streams")
    parser.add_argument("--cap", type=int, default=4, help="running steps per user in the fair mode")
    parser.add_argument("--give-up", type=float, default=300.0)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    log_dir = Path(tempfile.mkdtemp(prefix="chatforge-fairness-"))
    with private_postgres(max_connections=200) as pg, private_redis() as redis_server:
        provider, provider_url = start_provider(args.step, log_dir)
        try:
            pg_url = pg.url("postgres").rsplit("/", 1)[0]
            reports = [measure(mode, cap, args, pg_url=pg_url, redis_url=redis_server.url(0),
                               provider_url=provider_url, log_dir=log_dir)
                       for mode, cap in (("uncapped", 0), ("capped", args.cap))]
        finally:
            provider.stop()
    print(json.dumps(reports, indent=2))
    text = table(reports, args)
    print(text)
    if not args.no_write:
        write_doc(text)
    print(f"logs: {log_dir}")


if __name__ == "__main__":
    main()
