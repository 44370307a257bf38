"""Where a run's time goes, segment by segment: `python -m bench.timeline`.

`make bench` says how much orchestration a step costs; this says where. It
starts the benchmark's stack (`bench.run.bench_stack`: the gevent LLM
worker, the worker of the tool calls' pool (``--tool-pool``: the tools_io
worker's threads by default, or the prefork tools worker), the web process and the socket process, a
private Postgres with ``pg_stat_statements`` tracking planning too, two
private Redis servers, the timed fake OpenAI server), runs one scenario
(``--rounds`` tool rounds of one 0 ms call, the model answering 200 ms
after each request) ``--runs`` times one after another, each followed on
its run socket, and lines up for each run the clocks of every party:

- the client: POST sent, 202 read, ``run.completed`` received;
- the ledger: the run's ``created_at`` and ``finished_at``, each turn's and
  each call's ``started_at`` (its claim) and ``finished_at`` (its record),
  the turn's ``provider_ms`` and the call's ``duration_ms``;
- the fake provider: when each model request arrived, when its answer was
  written out.

It prints each segment's p50 / min / max over the runs, then the
statements that took the most database time, per process, with how often
each was planned (a prepared statement is planned a few times per
connection, then not again; see docs/decisions/0020).

The clocks are ``time.time()`` of processes on one machine. Nothing here
is a target; the figures move with the machine's load (docs/performance.md).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx
import psycopg

from bench.run import (
    DB_NAME,
    Sequential,
    TOOL_POOLS,
    TimedFakeOpenAIServer,
    bench_stack,
    counting_postgres,
    distributed_run,
    fresh_database,
    make_tokens,
    new_conversations,
    prepare_counting,
    private_redis,
)
from bench.scenarios import tool_rounds
from bench.services import add_env_argument
from bench.timed_provider import Request

WARM_UP_RUNS = 3


def ms(start: float, end: float) -> float:
    return (end - start) * 1000


@dataclass(frozen=True)
class Ledger:
    """One run's rows: (created, finished), turns as (iteration, started,
    finished, provider_ms), calls as (iteration, started, finished,
    duration_ms), in order."""

    run: tuple[datetime, datetime]
    turns: list[tuple[int, datetime, datetime, int]]
    calls: list[tuple[int, datetime, datetime, int]]


def ledger_of(conn: psycopg.Connection, run_id: str) -> Ledger:
    return Ledger(
        run=conn.execute("SELECT created_at, finished_at FROM conversations_run WHERE id = %s", (run_id,)).fetchone(),
        turns=conn.execute("SELECT iteration, started_at, finished_at, provider_ms FROM conversations_llmturn "
                           "WHERE run_id = %s ORDER BY iteration", (run_id,)).fetchall(),
        calls=conn.execute("SELECT iteration, started_at, finished_at, duration_ms FROM conversations_toolinvocation "
                           "WHERE run_id = %s ORDER BY iteration, position", (run_id,)).fetchall(),
    )


def run_segments(run: Sequential, ledger: Ledger, requests: dict[int, Request]) -> dict[str, float]:
    """One run's segments in milliseconds, in the order they happen.
    ``requests``: the fake provider's record of each round's request."""
    ts = datetime.timestamp
    created, finished = ledger.run
    out = {
        "POST sent → run row created (web)": ms(run.posted_at, ts(created)),
        "POST sent → 202 read (client)": run.post_ms,
    }
    previous_end, previous_label = ts(created), "run created"
    for iteration, started, done, provider_ms in ledger.turns:
        request = requests[iteration]
        out[f"{previous_label} → turn {iteration} claimed"] = ms(previous_end, ts(started))
        out[f"turn {iteration} claimed → its request at the model"] = ms(ts(started), request.arrived_at)
        out[f"turn {iteration} answer written → turn recorded"] = ms(request.done_at, ts(done))
        out[f"turn {iteration}: in-step time outside the model call"] = ms(ts(started), ts(done)) - provider_ms
        previous_end, previous_label = ts(done), f"turn {iteration} recorded"
        for _, c_started, c_done, duration_ms in [c for c in ledger.calls if c[0] == iteration]:
            out[f"turn {iteration} recorded → its call claimed"] = ms(ts(done), ts(c_started))
            out[f"call {iteration}: in-step time outside the tool"] = ms(ts(c_started), ts(c_done)) - duration_ms
            previous_end, previous_label = ts(c_done), f"call {iteration} recorded"
    out[f"{previous_label} → run finished"] = ms(previous_end, ts(finished))
    out["run finished → run.completed at the client"] = ms(ts(finished), run.posted_at + run.e2e_s)
    out["POST sent → run.completed (end to end)"] = run.e2e_s * 1000
    return out


def statements(conn: psycopg.Connection, limit: int) -> list[tuple]:
    """(process, calls, plans, plan ms per call, exec ms per call, statement)
    for the statements with the most database time."""
    return conn.execute(
        "SELECT substr(r.rolname, 7), s.calls, s.plans, s.total_plan_time / s.calls, s.total_exec_time / s.calls, "
        "       left(regexp_replace(s.query, '\\s+', ' ', 'g'), 90) "
        "FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid "
        "WHERE r.rolname LIKE 'bench\\_%%' AND s.calls > 0 "
        "ORDER BY s.total_plan_time + s.total_exec_time DESC LIMIT %s", (limit,)).fetchall()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="measured runs (after 3 warm-up runs)")
    parser.add_argument("--rounds", type=int, default=1, help="tool rounds per run (one call each)")
    parser.add_argument("--statements", type=int, default=15, help="statements listed")
    parser.add_argument("--tool-pool", choices=TOOL_POOLS, default="io", help="the pool the tool calls run on")
    add_env_argument(parser)
    args = parser.parse_args()

    scenario = tool_rounds(args.rounds, pool=args.tool_pool)
    fake = TimedFakeOpenAIServer().start()
    fake.add_script(scenario.name, list(scenario.replies))
    log_dir = Path(tempfile.mkdtemp(prefix="chatforge-timeline-"))
    try:
        with counting_postgres(track_planning=True) as pg, private_redis() as broker, private_redis() as events:
            database_url = fresh_database(pg=pg.url("postgres").rsplit("/", 1)[0], name=DB_NAME,
                                          redis_url=broker.url(0))
            prepare_counting(pg, DB_NAME)
            token = make_tokens(1, f"timeline-{uuid.uuid4().hex[:6]}", database_url, broker.url(0))[0]
            with bench_stack(pg=pg, broker=broker, events=events, provider_url=fake.base_url,
                             log_dir=log_dir, tool_pool=args.tool_pool, extra_env=args.env) as stack, \
                    httpx.Client(base_url=stack.api_url, headers={"Authorization": f"Bearer {token}"},
                                 timeout=60) as http:
                conversations = new_conversations(http, WARM_UP_RUNS + args.runs)
                runs = [distributed_run(http, stack.ws_url, token, conversation, scenario)
                        for conversation in conversations]
            with psycopg.connect(pg.url(DB_NAME)) as conn:
                segments: dict[str, list[float]] = defaultdict(list)
                for run in runs[WARM_UP_RUNS:]:
                    requests = {request.round: request for request in fake.requests_of(run.tag)}
                    for name, value in run_segments(run, ledger_of(conn, run.run_id), requests).items():
                        segments[name].append(value)
                top = statements(conn, args.statements)
    finally:
        fake.stop()

    print(f"{args.runs} runs of {args.rounds} tool round(s), one at a time; milliseconds")
    print(f"{'segment':62} {'p50':>7} {'min':>7} {'max':>7}")
    for name, values in segments.items():
        print(f"{name:62} {statistics.median(values):7.2f} {min(values):7.2f} {max(values):7.2f}")
    print("\nstatements with the most database time (warm-up included)")
    print(f"{'process':8} {'calls':>6} {'plans':>6} {'plan ms':>8} {'exec ms':>8}  statement")
    for role, calls, plans, plan_ms, exec_ms, text in top:
        print(f"{role:8} {calls:6d} {plans:6d} {plan_ms:8.3f} {exec_ms:8.3f}  {text}")


if __name__ == "__main__":
    main()
