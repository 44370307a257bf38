"""The event log's blocking reads share one ``XREAD`` per event loop
(``orchestration/event_log/stream_follower.py``), against a real Redis:
every reader still gets exactly what a read of its own would give it."""

from __future__ import annotations

import asyncio
import socket
import uuid

import pytest
import redis.asyncio as aioredis
from django.conf import settings
from redis.exceptions import ConnectionError as RedisConnectionError

from orchestration.event_log.base import PendingAppend
from orchestration.event_log.redis_stream import RedisStreamEventLog, _keys


class CountingRedis(aioredis.Redis):
    """The real asyncio client, counting the XREADs it sends."""

    xreads = 0

    async def xread(self, *args, **kwargs):
        type(self).xreads += 1
        return await super().xread(*args, **kwargs)


@pytest.fixture
def log():
    return RedisStreamEventLog(url=settings.REDIS_URL, active_ttl_s=60, ended_ttl_s=30, max_len=10_000)


def delta(n: int) -> dict:
    return {"type": "content.delta", "data": {"text": str(n)}}


async def follow(log: RedisStreamEventLog, run_id: str, until: int, *, block_ms: int = 5000) -> list[int]:
    """Read like a run socket does, until seq ``until``; the seqs seen."""
    seen: list[int] = []
    while not seen or seen[-1] < until:
        events = await log.aread(run_id, after=seen[-1] if seen else 0, block_ms=block_ms)
        seen.extend(event["seq"] for event in events)
    return seen


def test_readers_of_many_runs_share_one_read(log):
    """20 runs followed at once, 10 events each, a round's events appended
    together (as a busy worker fleet does): every reader sees 1…10 in
    order, over far fewer XREADs than events, while the 20 wait on one
    connection instead of one each."""
    runs = [str(uuid.uuid4()) for _ in range(20)]
    rounds = 10

    async def scenario() -> tuple[list[list[int]], int, int]:
        client = CountingRedis.from_url(settings.REDIS_URL, socket_timeout=30)
        log._async_clients[asyncio.get_running_loop()] = client
        readers = [asyncio.create_task(follow(log, run_id, rounds)) for run_id in runs]
        await asyncio.sleep(0.2)  # every reader is waiting
        in_use = len(client.connection_pool._in_use_connections)
        for n in range(rounds):
            appends = [PendingAppend(run_id, delta(n)) for run_id in runs]
            await asyncio.to_thread(log.append_many, appends)
            await asyncio.sleep(0.02)
        seen = await asyncio.gather(*readers)
        return seen, CountingRedis.xreads, in_use

    CountingRedis.xreads = 0
    seen, xreads, in_use = asyncio.run(scenario())
    assert all(seqs == list(range(1, rounds + 1)) for seqs in seen)
    assert xreads < len(runs) * rounds / 2  # not one read per event relayed
    assert in_use == 1  # the follower's read, not one per reader


def test_events_that_arrive_while_the_reader_is_away_are_kept(log):
    run_id = str(uuid.uuid4())

    async def scenario() -> tuple[list[int], list[int]]:
        reading = asyncio.create_task(log.aread(run_id, after=0, block_ms=5000))
        await asyncio.sleep(0.1)
        log.append(run_id, delta(1))
        first = [e["seq"] for e in await reading]
        for n in range(2, 5):  # the reader is busy sending: nobody waits
            log.append(run_id, delta(n))
        await asyncio.sleep(0.2)
        rest = [e["seq"] for e in await log.aread(run_id, after=first[-1], block_ms=5000)]
        return first, rest

    first, rest = asyncio.run(scenario())
    assert first == [1]
    assert rest == [2, 3, 4]


def test_a_wait_that_brings_nothing_returns_empty_after_block_ms(log):
    async def scenario() -> list:
        return await log.aread(str(uuid.uuid4()), after=0, block_ms=150)

    assert asyncio.run(scenario()) == []


def test_a_reader_behind_another_gets_everything_after_its_own_cursor(log):
    """Two sockets on one run in one process, the second resuming from seq 2
    after the first has read to 6."""
    run_id = str(uuid.uuid4())
    for n in range(1, 7):
        log.append(run_id, delta(n))

    async def scenario() -> tuple[list[int], list[int], list[int]]:
        ahead = await follow(log, run_id, 6)
        behind = [e["seq"] for e in await log.aread(run_id, after=2, block_ms=5000)]
        waiting = asyncio.create_task(log.aread(run_id, after=6, block_ms=5000))
        await asyncio.sleep(0.1)
        log.append(run_id, delta(7))
        return ahead, behind, [e["seq"] for e in await waiting]

    ahead, behind, live = asyncio.run(scenario())
    assert ahead == [1, 2, 3, 4, 5, 6]
    assert behind == [3, 4, 5, 6]
    assert live == [7]


def test_a_log_that_restarts_higher_is_followed(log):
    """A lost log restarts far above the last seq (continuity.py): the
    follower's read from the old cursor returns the new entries."""
    run_id = str(uuid.uuid4())
    log.append(run_id, delta(1), starts_log=True)

    async def scenario() -> list[int]:
        seen = [e["seq"] for e in await log.aread(run_id, after=0, block_ms=5000)]
        waiting = asyncio.create_task(log.aread(run_id, after=seen[-1], block_ms=5000))
        await asyncio.sleep(0.1)
        log.delete(run_id)
        log._append(keys=_keys(run_id), args=[*log._args(delta(2), None, False), "restart"])
        return seen + [e["seq"] for e in await waiting]

    seen = asyncio.run(scenario())
    assert seen[0] == 1
    assert len(seen) == 2 and seen[1] > 1_000_000


def test_a_cancelled_reader_leaves_no_waiter(log):
    run_id = str(uuid.uuid4())

    async def scenario() -> int:
        reading = asyncio.create_task(log.aread(run_id, after=0, block_ms=5000))
        await asyncio.sleep(0.1)
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading
        follower = log._follower()
        return sum(len(f.waiters) for f in follower._streams.values())

    assert asyncio.run(scenario()) == 0


def test_redis_unreachable_fails_the_waiting_readers():
    """The readers get the connection error (the relay's retry loop reads
    again later); nobody is left waiting for a read that will not come."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = RedisStreamEventLog(url=f"redis://127.0.0.1:{port}/0", active_ttl_s=60, ended_ttl_s=30, max_len=100)

    async def scenario() -> None:
        await asyncio.gather(*(log.aread(str(uuid.uuid4()), after=0, block_ms=5000) for _ in range(3)))

    with pytest.raises(RedisConnectionError):
        asyncio.run(scenario())



def test_a_stream_nobody_asks_about_is_no_longer_read(log):
    """A socket that closed leaves its run's stream behind; after the
    linger the follower's XREAD no longer names it (checked when a read
    returns: here every 0.3 s)."""
    from orchestration.event_log.redis_stream import _decode
    from orchestration.event_log.stream_follower import StreamFollower

    gone, kept = str(uuid.uuid4()), str(uuid.uuid4())
    log.append(gone, delta(1))

    async def scenario() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        follower = StreamFollower(
            log._async_client(), decode=_decode, read_now=log._read_now, max_block_ms=300, linger_s=0.2
        )
        log._followers[loop] = follower
        await log.aread(gone, after=0, block_ms=1000)  # then the reader goes away
        before = set(follower._streams)
        for _ in range(8):  # another socket keeps the follower reading
            await log.aread(kept, after=0, block_ms=200)
        return before, set(follower._streams)

    before, after = asyncio.run(scenario())
    assert before == {_keys(gone)[0].encode()}
    assert after == {_keys(kept)[0].encode()}
