"""Orchestration overhead benchmark: `make bench` / `python -m bench.run`.

Runs the same scripted conversation (3 tool rounds, 4 tool calls, the fake
LLM answering after 200 ms, tools taking 50 ms) through the distributed stack
(real Celery workers on Postgres and Redis, uvicorn, websocket client) and
through a plain in-process loop calling the same provider and tools. Reports
per-step orchestration overhead from the step ledger (p50/p99), the
end-to-end ratio, and how long a round of 5 parallel 200 ms tools takes.
Results replace the generated section of docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime

for _name in ("DATABASE_URL", "REDIS_URL"):  # this process only needs the model classes
    os.environ.pop(_name, None)
os.environ["DJANGO_SETTINGS_MODULE"] = "chatforge.settings"
os.environ.setdefault("CHATFORGE_LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

import psycopg  # noqa: E402
import redis  # noqa: E402

from bench.scenarios import (  # noqa: E402
    LLM_LATENCY_S,
    PARALLEL_CALLS,
    PARALLEL_TOOL_MS,
    TOOL_MS,
    parallel_round,
    run_in_process,
    three_rounds,
)
from orchestration.providers.openai_compat import OpenAICompatibleProvider  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402
from tests.support.client import ApiClient, follow_run  # noqa: E402
from tests.support.stack import ROOT, TEST_SECRET_KEYS, base_env, distributed_stack  # noqa: E402
from tools.registry import build_registry  # noqa: E402

PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
DB_NAME = "chatforge_bench"
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
DOC = ROOT / "docs" / "performance.md"
TOOL_MODULE = "tests.support.tools"  # slow_sleep: a tool that takes as long as asked
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[index]


def fresh_database() -> str:
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB_NAME}")
    redis.Redis.from_url(REDIS_URL).flushdb()
    url = f"{PG}/{DB_NAME}"
    env = base_env(DATABASE_URL=url, REDIS_URL=REDIS_URL, DJANGO_SECRET_KEY="bench-" + "k" * 40,
                   CHATFORGE_SECRET_KEYS=TEST_SECRET_KEYS)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    return url


def issue_token(database_url: str) -> str:
    env = base_env(DATABASE_URL=database_url, REDIS_URL=REDIS_URL, DJANGO_SECRET_KEY="bench-" + "k" * 40,
                   CHATFORGE_SECRET_KEYS=TEST_SECRET_KEYS)
    out = subprocess.run([sys.executable, "manage.py", "create_demo_user", "--token-only"], cwd=ROOT, env=env,
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def distributed_run(api: ApiClient, ws_url: str, token: str, model: str) -> tuple[str, float]:
    conversation = api.new_conversation()
    started = time.perf_counter()
    accepted = api.post_message(conversation, "benchmark", model=model)
    events = follow_run(ws_url, accepted["run_id"], token)
    elapsed = time.perf_counter() - started
    assert events[-1]["type"] == "run.completed", events[-1]
    return accepted["run_id"], elapsed


def step_overheads(conn: psycopg.Connection, run_id: str) -> list[float]:
    """Per step (each LLM turn, each tool call, finalize): the wait from its
    predecessor's end to its own start, plus its time that is not provider or
    tool work. Milliseconds."""
    run = conn.execute("SELECT created_at, finished_at FROM conversations_run WHERE id = %s", (run_id,)).fetchone()
    turns = conn.execute(
        "SELECT iteration, started_at, finished_at, provider_ms FROM conversations_llmturn "
        "WHERE run_id = %s ORDER BY iteration", (run_id,)).fetchall()
    calls = conn.execute(
        "SELECT iteration, started_at, finished_at, duration_ms FROM conversations_toolinvocation "
        "WHERE run_id = %s", (run_id,)).fetchall()
    ms = lambda delta: delta.total_seconds() * 1000  # noqa: E731
    overheads: list[float] = []
    previous_end = run[0]
    for iteration, started, finished, provider_ms in turns:
        overheads.append(ms(started - previous_end) + ms(finished - started) - provider_ms)
        round_calls = [c for c in calls if c[0] == iteration]
        for _, c_started, c_finished, duration_ms in round_calls:
            overheads.append(ms(c_started - finished) + ms(c_finished - c_started) - duration_ms)
        previous_end = max([c[2] for c in round_calls], default=finished)
    overheads.append(ms(run[1] - previous_end))  # finalize
    return overheads


def parallel_round_ms(conn: psycopg.Connection, run_id: str) -> float:
    """From the model asking for the 5 calls to the last result recorded."""
    asked = conn.execute("SELECT finished_at FROM conversations_llmturn WHERE run_id = %s AND iteration = 0",
                         (run_id,)).fetchone()[0]
    done = conn.execute("SELECT max(finished_at) FROM conversations_toolinvocation WHERE run_id = %s",
                        (run_id,)).fetchone()[0]
    return (done - asked).total_seconds() * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--parallel-runs", type=int, default=5)
    parser.add_argument("--no-write", action="store_true", help="Print only; leave docs/performance.md alone.")
    args = parser.parse_args()

    fake = FakeOpenAIServer().start()
    fake.add_script("bench-3rounds", three_rounds())
    fake.add_script("bench-parallel", parallel_round())
    database_url = fresh_database()
    token = issue_token(database_url)

    # Baseline: the same provider and tools in a plain loop.
    provider = OpenAICompatibleProvider(base_url=fake.base_url, api_key="bench")
    registry = build_registry([TOOL_MODULE])
    run_in_process(provider, registry, "bench-3rounds", "warm-up")
    baseline = [run_in_process(provider, registry, "bench-3rounds", "benchmark") for _ in range(args.runs)]

    with distributed_stack(
        database_url=database_url, redis_url=REDIS_URL,
        extra_env={"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "bench", "CHATFORGE_TOOL_MODULES": TOOL_MODULE,
                   "CHATFORGE_LOG_LEVEL": "WARNING"},
        tool_concurrency=PARALLEL_CALLS,
    ) as stack:
        api = ApiClient(stack.http_url, token)
        for _ in range(2):
            distributed_run(api, stack.ws_url, token, "bench-3rounds")  # warm-up: imports, connections
        runs = [distributed_run(api, stack.ws_url, token, "bench-3rounds") for _ in range(args.runs)]
        parallel = [distributed_run(api, stack.ws_url, token, "bench-parallel")[0] for _ in range(args.parallel_runs)]
    fake.stop()

    with psycopg.connect(database_url) as conn:
        overheads = [o for run_id, _ in runs for o in step_overheads(conn, run_id)]
        rounds_ms = [parallel_round_ms(conn, run_id) for run_id in parallel]
    e2e = [elapsed for _, elapsed in runs]
    results = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "runs": args.runs,
        "steps_per_run": len(overheads) // args.runs,
        "overhead_p50_ms": percentile(overheads, 50),
        "overhead_p99_ms": percentile(overheads, 99),
        "overhead_max_ms": max(overheads),
        "distributed_e2e_p50_s": statistics.median(e2e),
        "in_process_e2e_p50_s": statistics.median(baseline),
        "ratio_p50": statistics.median(e2e) / statistics.median(baseline),
        "parallel_round_p50_ms": statistics.median(rounds_ms),
        "parallel_round_max_ms": max(rounds_ms),
    }
    print(json.dumps(results, indent=2))
    if not args.no_write:
        write_doc(results)


def write_doc(r: dict) -> None:
    met = lambda ok: "met" if ok else "**not met**"  # noqa: E731
    section = f"""{BEGIN}
Last run: {r['date']} on {r['machine']} (`make bench`).
Scenario: 3 tool rounds with 4 `slow_sleep` calls ({TOOL_MS} ms each; 2 in parallel, then 1, then 1)
and a final answer; the fake LLM answers each turn after {int(LLM_LATENCY_S * 1000)} ms.
{r['runs']} measured runs after 2 warm-up runs; {r['steps_per_run']} steps per run (4 model turns, 4 tool calls, finalize).

| measure | result | target | |
|---|---|---|---|
| orchestration overhead per step, p50 | {r['overhead_p50_ms']:.1f} ms | ≤ 5 ms | {met(r['overhead_p50_ms'] <= 5)} |
| orchestration overhead per step, p99 | {r['overhead_p99_ms']:.1f} ms (max {r['overhead_max_ms']:.1f} ms) | | |
| end to end, distributed (p50) | {r['distributed_e2e_p50_s'] * 1000:.0f} ms | | |
| end to end, in-process loop (p50) | {r['in_process_e2e_p50_s'] * 1000:.0f} ms | | |
| ratio distributed / in-process | {r['ratio_p50']:.3f} | ≤ 1.05 | {met(r['ratio_p50'] <= 1.05)} |
| round of {PARALLEL_CALLS} parallel {PARALLEL_TOOL_MS} ms tools (p50 / max) | {r['parallel_round_p50_ms']:.0f} / {r['parallel_round_max_ms']:.0f} ms | ≤ {1.2 * PARALLEL_TOOL_MS:.0f} ms | {met(r['parallel_round_p50_ms'] <= 1.2 * PARALLEL_TOOL_MS)} |
{END}"""
    text = DOC.read_text() if DOC.exists() else ""
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:
        text = text + "\n" + section + "\n"
    DOC.write_text(text)


if __name__ == "__main__":
    main()
