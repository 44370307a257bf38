"""Websocket resume under churn: `python -m bench.ws_resume`.

Starts the distributed stack (real Celery workers on Postgres and Redis,
``--servers`` uvicorn web processes, the fake LLM) on loopback, then starts
runs that stream one word every ``--interval`` seconds for about
``--duration`` seconds. ``--clients`` websocket clients (asyncio, one
process) follow them, spread evenly over the runs. Each client, over and
over: connects (resuming with ``?after=<last seq>`` after the first time,
on the next web process in turn, so most resumes land on another process
than the one that served the last events), reads a few events, drops the
TCP connection without a close frame, and waits a moment. A client stops
once it has read its run's terminal event (the server then closes with
1000). At the end every client checks it received every seq of its run
exactly once, in order.

Prints connects, resumes, events, lost, repeated and out-of-order events,
early server closes, reconnect-to-first-event latency and handshake time
(p50/p99) as JSON.
Bounded: at most 2,000 clients, 300 runs and 4 web processes, and every client gives up
``--duration`` + 90 s after the start.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from bench.services import fresh_database, issue_token, percentile
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.support.client import ApiClient
from tests.support.stack import distributed_stack, free_port, start_server

PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
DB_NAME = "chatforge_bench_ws"
REDIS_URL = os.environ.get("BENCH_WS_REDIS_URL", "redis://127.0.0.1:6379/12")
MODEL = "bench-ws-stream"
TERMINAL = {"run.completed", "run.failed", "run.cancelled"}
MAX_CLIENTS = 2000
MAX_RUNS = 300
MAX_SERVERS = 4
GRACE_S = 90.0  # after --duration, how long clients may take to reach the terminal event
READ_TIMEOUT_S = 30.0


@dataclass
class Client:
    """One client's view: every event it read, and what happened to its connections."""

    run_id: str
    seqs: list[int] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    connects: int = 0
    resumes: int = 0
    first_event_s: list[float] = field(default_factory=list)  # per resume: connect start → first event
    handshake_s: list[float] = field(default_factory=list)  # per connect: connect start → socket open
    early_closes: list[int | None] = field(default_factory=list)  # server closed before the terminal event
    failures: list[str] = field(default_factory=list)  # handshakes refused, timeouts
    final_close: int | None = None

    @property
    def done(self) -> bool:
        return bool(self.types) and self.types[-1] in TERMINAL

    def check(self) -> dict[str, int]:
        """Lost, repeated and out-of-order seqs, against 1..(terminal seq)."""
        last = self.seqs[-1] if self.seqs else 0
        distinct = set(self.seqs)
        return {
            "lost": len(set(range(1, last + 1)) - distinct),
            "repeated": len(self.seqs) - len(distinct),
            "out_of_order": sum(1 for a, b in zip(self.seqs, self.seqs[1:]) if b <= a),
        }


async def _read_some(ws: ClientConnection, client: Client, want: int, started: float, resumed: bool) -> None:
    for count in range(want):
        event = json.loads(await asyncio.wait_for(ws.recv(), READ_TIMEOUT_S))
        if count == 0 and resumed:
            client.first_event_s.append(time.perf_counter() - started)
        client.seqs.append(event["seq"])
        client.types.append(event["type"])
        if event["type"] in TERMINAL:
            return


async def follow(client: Client, ws_bases: list[str], token: str, rng: random.Random, give_up_at: float,
                 pause_s: tuple[float, float], reads: tuple[int, int]) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    turn = rng.randrange(len(ws_bases))
    while not client.done and time.monotonic() < give_up_at:
        resumed = bool(client.seqs)
        turn += 1
        ws_base = ws_bases[turn % len(ws_bases)]
        url = f"{ws_base}/ws/runs/{client.run_id}/" + (f"?after={client.seqs[-1]}" if resumed else "")
        started = time.perf_counter()
        try:
            ws = await connect(url, additional_headers=headers, open_timeout=READ_TIMEOUT_S,
                               ping_interval=None, compression=None)
        except (OSError, InvalidStatus, TimeoutError) as exc:
            client.failures.append(type(exc).__name__)
            await asyncio.sleep(rng.uniform(*pause_s))
            continue
        client.handshake_s.append(time.perf_counter() - started)
        client.connects += 1
        client.resumes += resumed
        try:
            await _read_some(ws, client, rng.randint(*reads), started, resumed)
            if client.done:  # the server closes after the terminal event
                try:
                    await asyncio.wait_for(ws.recv(), READ_TIMEOUT_S)
                except ConnectionClosed as exc:
                    client.final_close = exc.rcvd.code if exc.rcvd else None
                continue
        except ConnectionClosed as exc:
            client.early_closes.append(exc.rcvd.code if exc.rcvd else None)
        except TimeoutError:
            client.failures.append("read timeout")
        # Drop abruptly: no close frame, as a phone losing its network would.
        ws.transport.abort()
        await asyncio.sleep(rng.uniform(*pause_s))


async def churn(run_ids: list[str], clients: int, ws_bases: list[str], token: str, duration_s: float,
                pause_s: tuple[float, float], reads: tuple[int, int]) -> list[Client]:
    followers = [Client(run_id=run_ids[i % len(run_ids)]) for i in range(clients)]
    give_up_at = time.monotonic() + duration_s + GRACE_S

    async def start(index: int, client: Client) -> None:
        rng = random.Random(index)
        await asyncio.sleep(rng.uniform(0, 2.0))  # spread the first handshakes over 2 s
        await follow(client, ws_bases, token, rng, give_up_at, pause_s, reads)

    await asyncio.gather(*(start(i, c) for i, c in enumerate(followers)))
    return followers


def summarize(followers: list[Client], elapsed_s: float) -> dict:
    checks = [c.check() for c in followers]
    latencies = [s * 1000 for c in followers for s in c.first_event_s]
    handshakes = [s * 1000 for c in followers for s in c.handshake_s]
    failures: dict[str, int] = {}
    for c in followers:
        for name in c.failures:
            failures[name] = failures.get(name, 0) + 1
    return {
        "clients": len(followers),
        "runs": len({c.run_id for c in followers}),
        "elapsed_s": round(elapsed_s, 1),
        "connects": sum(c.connects for c in followers),
        "resumes": sum(c.resumes for c in followers),
        "events": sum(len(c.seqs) for c in followers),
        "clients_done": sum(c.done for c in followers),
        "lost": sum(x["lost"] for x in checks),
        "repeated": sum(x["repeated"] for x in checks),
        "out_of_order": sum(x["out_of_order"] for x in checks),
        "snapshots": sum(t == "snapshot" for c in followers for t in c.types),
        "early_server_closes": sum(len(c.early_closes) for c in followers),
        "final_close_codes": sorted({str(c.final_close) for c in followers if c.done}),
        "connect_failures": failures,
        "first_event_after_resume_p50_ms": round(percentile(latencies, 50), 1),
        "first_event_after_resume_p99_ms": round(percentile(latencies, 99), 1),
        "first_event_after_resume_max_ms": round(max(latencies, default=0.0), 1),
        "handshake_p50_ms": round(percentile(handshakes, 50), 1),
        "handshake_p99_ms": round(percentile(handshakes, 99), 1),
        "connects_per_s": round(sum(c.connects for c in followers) / elapsed_s, 1) if elapsed_s else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--servers", type=int, default=2, help="web processes the clients take turns on")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds each run streams")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between streamed words")
    parser.add_argument("--reads", type=int, nargs=2, default=(3, 8), metavar=("MIN", "MAX"),
                        help="events a client reads before dropping")
    parser.add_argument("--pause", type=float, nargs=2, default=(1.0, 3.0), metavar=("MIN", "MAX"),
                        help="seconds a client waits before resuming")
    args = parser.parse_args()
    clients, runs = min(args.clients, MAX_CLIENTS), min(args.runs, MAX_RUNS)
    duration = min(args.duration, 600.0)

    words = max(1, round(duration / args.interval))
    fake = FakeOpenAIServer().start()
    fake.add_script(MODEL, [Reply(text=" ".join(f"w{i}" for i in range(words)), chunk_delay_s=args.interval)])
    database_url = fresh_database(pg=PG, name=DB_NAME, redis_url=REDIS_URL)
    token = issue_token(database_url=database_url, redis_url=REDIS_URL)
    try:
        with distributed_stack(
            database_url=database_url, redis_url=REDIS_URL, llm_concurrency=runs + 2, tool_concurrency=1,
            extra_env={"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "bench", "CHATFORGE_LOG_LEVEL": "WARNING",
                       "CHATFORGE_MESSAGE_RATE": "100000/min", "CHATFORGE_MAX_ACTIVE_RUNS_PER_USER": str(runs + 10)},
        ) as stack:
            ws_bases = [stack.ws_url]
            for index in range(1, max(1, min(args.servers, MAX_SERVERS))):
                port = free_port()
                stack.processes.append(start_server(port=port, env=stack.env, log_dir=stack.log_dir,
                                                    name=f"server-{index + 1}"))
                ws_bases.append(f"ws://127.0.0.1:{port}")
            api = ApiClient(stack.http_url, token)
            run_ids = [api.post_message(api.new_conversation(), "stream", model=MODEL)["run_id"] for _ in range(runs)]
            started = time.monotonic()
            followers = asyncio.run(churn(run_ids, clients, ws_bases, token, duration,
                                          tuple(args.pause), tuple(args.reads)))
            elapsed = time.monotonic() - started
            server_log = "".join(p.log() for p in stack.processes if p.name.startswith("server"))
    finally:
        fake.stop()

    results = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "events_per_run": words + 3,  # run.started, llm.started, the words, run.completed
        "interval_s": args.interval,
        "servers": len(ws_bases),
        "reads": list(args.reads),
        "pause_s": list(args.pause),
        **summarize(followers, elapsed),
        "server_unretrieved_task_errors": server_log.count("Task exception was never retrieved"),
        "server_asgi_exceptions": server_log.count("Exception in ASGI application"),
    }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
