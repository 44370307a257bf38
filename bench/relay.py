"""The relay's read path alone: `python -m bench.relay` (``make bench-relay``).

A run socket's reader waits on the event log with a blocking ``aread`` and
sends what it gets. This benchmark runs only the waiting half, in one
asyncio process as the web process does: ``--streams`` readers, each
following its own run's stream from seq 0 until it has seen ``--events``
events, while another process appends one event to every stream every
``--tick`` seconds (one pipeline per tick, as a busy worker fleet writes).
A private ``redis-server`` holds the streams.

It reports, per number of streams: the readers' CPU per event relayed
(``time.process_time`` of the reading process over the events it
received), and the latency from an event's append to its reader having it
(p50 / p99, one machine clock). It measures what docs/performance.md's
"Relay" section compares (one ``XREAD`` per socket against one per process).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import sys
import time
import uuid

from bench.services import percentile
from orchestration.event_log.base import PendingAppend
from orchestration.event_log.redis_stream import RedisStreamEventLog
from tests.support.private_services import private_redis


def _log(url: str) -> RedisStreamEventLog:
    return RedisStreamEventLog(url=url, active_ttl_s=600, ended_ttl_s=60, max_len=100_000, max_connections=10_000)


def _append_ticks(url: str, runs: list[str], events: int, tick_s: float, start_at: float) -> None:
    """One event to every stream per tick; each carries its append time."""
    log = _log(url)
    while time.time() < start_at:
        time.sleep(0.001)
    for _ in range(events):
        began = time.time()
        log.append_many(
            [PendingAppend(run_id, {"type": "content.delta", "data": {"text": "x" * 40, "t": began}}) for run_id in runs]
        )
        time.sleep(max(0.0, tick_s - (time.time() - began)))


async def _follow(log: RedisStreamEventLog, run_id: str, events: int, latencies: list[float]) -> None:
    after = 0
    while after < events:
        for event in await log.aread(run_id, after=after, block_ms=5000):
            after = event["seq"]
            latencies.append(time.time() - event["data"]["t"])


async def _measure(url: str, streams: int, events: int, tick_s: float) -> dict:
    log = _log(url)
    runs = [str(uuid.uuid4()) for _ in range(streams)]
    latencies: list[float] = []
    appender = multiprocessing.Process(target=_append_ticks, args=(url, runs, events, tick_s, time.time() + 1.0))
    appender.start()
    readers = [asyncio.create_task(_follow(log, run_id, events, latencies)) for run_id in runs]
    cpu_before = time.process_time()
    await asyncio.gather(*readers)
    cpu_s = time.process_time() - cpu_before
    appender.join()
    for run_id in runs:
        log.delete(run_id)
    return {
        "streams": streams,
        "events": len(latencies),
        "events_per_s": round(streams / tick_s),
        "cpu_s": round(cpu_s, 2),
        "cpu_us_per_event": round(cpu_s / len(latencies) * 1e6, 1),
        "latency_p50_ms": round(percentile(latencies, 50) * 1000, 1),
        "latency_p99_ms": round(percentile(latencies, 99) * 1000, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, action="append", help="readers, one stream each (repeatable)")
    parser.add_argument("--events", type=int, default=100, help="events per stream")
    parser.add_argument("--tick", type=float, default=0.05, help="seconds between a stream's events")
    parser.add_argument("--json", default="", help="also write the results here")
    args = parser.parse_args(argv)
    results = []
    with private_redis() as redis_server:
        for streams in args.streams or [10, 100, 500]:
            result = asyncio.run(_measure(redis_server.url(), streams, args.events, args.tick))
            print(json.dumps(result), flush=True)
            results.append(result)
    print("| streams | events/s | reader CPU per event | latency p50 / p99 |")
    print("|---|---|---|---|")
    for r in results:
        print(f"| {r['streams']} | {r['events_per_s']} | {r['cpu_us_per_event']} µs | "
              f"{r['latency_p50_ms']} / {r['latency_p99_ms']} ms |")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
