"""The load benchmark's clients: many runs started over REST, each followed on
its own websocket, in one asyncio process (``bench/load.py`` starts one or
more of these processes and merges what they saw).

A client, at its start time: ``POST …/messages/`` (202 with the run id),
connects ``/ws/runs/{id}/`` at once and reads until the server closes the
socket. For every event it keeps the wall-clock time of receipt; for each
``content.delta`` it reads the provider's emit time out of the text
(``w<i>@<unix time>``, see ``bench/load_provider.py``), so relay latency is
measured end to end, provider emit → websocket receipt, on one machine clock.
"""

from __future__ import annotations

import asyncio
import gc
import re
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime

import httpx
import orjson
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

TERMINAL = {"run.completed", "run.failed", "run.cancelled"}
_CHUNK = re.compile(r"w(\d+)@(\d+\.\d+)")


@dataclass
class RunResult:
    index: int
    conversation_id: str
    run_id: str = ""
    post_status: int = 0
    post_error: str = ""
    posted_at: float = 0.0  # wall clock, POST sent
    accepted_at: float = 0.0  # 202 received
    opened_at: float = 0.0  # websocket open
    first_delta_at: float = 0.0
    last_delta_at: float = 0.0
    terminal: str = ""
    close_code: int | None = None
    close_error: str = ""
    seqs: list[int] = field(default_factory=list)
    chunks: list[int] = field(default_factory=list)  # provider chunk indexes, in order received
    # Provider emit → client receipt, for chunks emitted after the socket
    # opened (live relay); chunks emitted earlier (while the client still
    # waited for its 202, or for the handshake) are sent on connect: catch-up.
    relay_ms: list[float] = field(default_factory=list)
    relay_at: list[float] = field(default_factory=list)  # each relay_ms value's emit time (unix)
    catchup_ms: list[float] = field(default_factory=list)
    publish_ms: list[float] = field(default_factory=list)  # provider emit → event "ts" (worker publish)
    snapshots: int = 0
    deltas: int = 0  # content.delta events received (a coalesced one carries several chunks)


def _iso(ts: str) -> float:
    return datetime.fromisoformat(ts).timestamp()


async def _follow(result: RunResult, ws_url: str, headers: dict[str, str], give_up_s: float) -> None:
    try:
        async with asyncio.timeout(give_up_s):
            async with connect(
                ws_url,
                additional_headers=headers,
                open_timeout=give_up_s,
                ping_interval=None,
                compression=None,
                max_queue=None,
            ) as ws:
                result.opened_at = time.time()
                try:
                    async for message in ws:
                        received = time.time()
                        event = orjson.loads(message)
                        result.seqs.append(event.get("seq", -1))
                        kind = event.get("type")
                        if kind == "content.delta":
                            if not result.first_delta_at:
                                result.first_delta_at = received
                            result.last_delta_at = received
                            result.deltas += 1
                            published = _iso(event["ts"])
                            for index, emitted in _CHUNK.findall(event["data"].get("text", "")):
                                result.chunks.append(int(index))
                                emitted_at = float(emitted)
                                if emitted_at >= result.opened_at:
                                    result.relay_ms.append((received - emitted_at) * 1000)
                                    result.relay_at.append(emitted_at)
                                else:
                                    result.catchup_ms.append((received - emitted_at) * 1000)
                                result.publish_ms.append((published - float(emitted)) * 1000)
                        elif kind == "snapshot":
                            result.snapshots += 1
                        elif kind in TERMINAL:
                            result.terminal = kind
                except ConnectionClosed as exc:
                    result.close_error = type(exc).__name__
                result.close_code = ws.close_code
    except (OSError, InvalidStatus, TimeoutError) as exc:
        result.close_error = f"{type(exc).__name__}: {exc}"[:200]


async def _one(
    result: RunResult,
    *,
    http: httpx.AsyncClient,
    ws_base: str,
    token: str,
    model: str,
    start_at: float,
    give_up_s: float,
) -> None:
    await asyncio.sleep(max(0.0, start_at - time.time()))
    headers = {"Authorization": f"Bearer {token}"}
    result.posted_at = time.time()
    try:
        response = await http.post(
            f"/api/conversations/{result.conversation_id}/messages/",
            json={"content": "load", "model": model},
            headers=headers,
        )
    except httpx.HTTPError as exc:
        result.post_error = f"{type(exc).__name__}: {exc}"[:200]
        return
    result.accepted_at = time.time()
    result.post_status = response.status_code
    if response.status_code != 202:
        result.post_error = response.text[:200]
        return
    result.run_id = response.json()["run_id"]
    await _follow(result, f"{ws_base}/ws/runs/{result.run_id}/", headers, give_up_s)


async def _run_all(
    jobs: list[dict],
    *,
    http_base: str,
    ws_base: str,
    model: str,
    start_at: float,
    ramp_s: float,
    total: int,
    give_up_s: float,
) -> list[RunResult]:
    limits = httpx.Limits(max_connections=len(jobs) + 10, max_keepalive_connections=len(jobs) + 10)
    async with httpx.AsyncClient(base_url=http_base, limits=limits, timeout=give_up_s) as http:
        # One request before the clock starts: a client's first request
        # pays for setting up its HTTP stack (40-70 ms here), which a
        # browser or SDK that has been talking to the server does not.
        (await http.get("/healthz")).raise_for_status()
        results = [RunResult(index=job["index"], conversation_id=job["conversation_id"]) for job in jobs]
        await asyncio.gather(
            *(
                _one(
                    result,
                    http=http,
                    ws_base=ws_base,
                    token=job["token"],
                    model=model,
                    start_at=start_at + (ramp_s * job["index"] / total if total else 0.0),
                    give_up_s=give_up_s,
                )
                for result, job in zip(results, jobs, strict=True)
            )
        )
    return results


def run_clients(
    jobs: list[dict],
    *,
    http_bases: list[str],
    ws_bases: list[str],
    model: str,
    start_at: float,
    ramp_s: float,
    total: int,
    give_up_s: float,
) -> dict:
    """Entry point of a client process: ``jobs`` are ``{index, conversation_id,
    token}``; run ``index`` goes to web process ``index % len(http_bases)``.
    Returns ``{"results": [RunResult as dict …], "cpu_s": this process' CPU time}``."""

    async def main() -> list[RunResult]:
        groups = [
            _run_all(
                [j for j in jobs if j["index"] % len(http_bases) == k],
                http_base=http_base,
                ws_base=ws_bases[k % len(ws_bases)],
                model=model,
                start_at=start_at,
                ramp_s=ramp_s,
                total=total,
                give_up_s=give_up_s,
            )
            for k, http_base in enumerate(http_bases)
        ]
        return [r for group in await asyncio.gather(*groups) for r in group]

    # The clients keep every chunk's timing in growing lists: with Python's
    # cyclic GC on, its full passes over them stopped a client process for
    # longer and longer as a run went on, and that was counted as relay
    # latency. Nothing here makes reference cycles worth collecting.
    gc.disable()
    try:
        results = [asdict(r) for r in asyncio.run(main())]
    finally:
        gc.enable()
    return {"results": results, "cpu_s": time.process_time()}
