"""Many blocking reads of many runs' streams over one ``XREAD`` per process.

A run socket (or SSE stream) waits for its run's next events with a
blocking read. Done as one ``XREAD BLOCK`` per socket, every event relayed
cost a Redis command of its own (about 200 µs of CPU in redis-py's asyncio
client, docs/performance.md) and every open socket held a Redis connection.
Here one task per event loop reads every followed stream in one ``XREAD
BLOCK``: an event arriving on any of them wakes it, it hands each waiting
reader the entries after that reader's cursor, and reads on from where each
stream got to. A reader coming back for more finds what arrived meanwhile
in the stream's buffer, so following a run costs no command per event.

A reader gets what ``XREAD`` from its cursor would give it: the entries
with a higher seq, in order, at most ``count`` — or nothing once its
``block_ms`` has passed. A stream nobody has asked about for ``linger_s``
is no longer read. Following many streams, the follower waits a few ms
between reads so that each brings more (the command's size grows with
the streams it names). The one ``XREAD`` names every followed stream, so the
keys must be on one Redis node (no Redis Cluster; the event log uses a
plain client).

When a reader asks for a stream the ``XREAD`` in flight does not cover, an
entry added to this follower's own *wake* stream (also in that ``XREAD``)
makes it return, and the next one covers it: one round trip per stream a
process starts following, not per event.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import redis.asyncio as aioredis

from .base import Event

logger = logging.getLogger(__name__)

# A wake stream outlives its follower by this much at most (it is re-armed
# on every wake; one entry long).
_WAKE_TTL_S = 600
# Each XREAD names every followed stream, so its cost grows with them
# (packing the command dominated the relay's CPU at 500 sockets when the
# next XREAD went out at once, and was still a quarter of a web process's
# relay at 100 sockets of real-speed streams, where events arrive all the
# time: docs/performance.md). With many streams followed, the follower lets
# events gather for up to 25 µs per stream, at most 5 ms, before it reads
# again: fewer, fuller reads for a few ms of relay latency.
_GATHER_S_PER_STREAM = 25e-6
_GATHER_MAX_S = 0.005
_GATHER_FROM_STREAMS = 50
# Streams nobody asked about for linger_s are dropped at most this often.
_FORGET_EVERY_S = 1.0


@dataclass
class _Waiter:
    after: int
    count: int
    future: asyncio.Future[list[Event]]


@dataclass
class _Followed:
    """One stream being read: ``buffer`` holds every entry with
    ``base < seq <= cursor``; the next ``XREAD`` asks for ``seq > cursor``."""

    cursor: int
    base: int
    last_wanted: float
    buffer: list[Event] = field(default_factory=list)
    waiters: list[_Waiter] = field(default_factory=list)
    read_from: int = -1  # the cursor the XREAD numbered ``read_number`` asked from
    read_number: int = -1


def _time_out(future: asyncio.Future[list[Event]]) -> None:
    """A blocking read's time is up with nothing new: it returns no events."""
    if not future.done():
        future.set_result([])


def _after(events: list[Event], after: int, count: int) -> list[Event]:
    return [event for event in events if event["seq"] > after][:count]


class StreamFollower:
    """Blocking reads of streams for one event loop, over one ``XREAD``."""

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        decode: Callable[[list], list[Event]],
        read_now: Callable[[str, int, int], Awaitable[list[Event]]],
        max_block_ms: int,
        buffer_len: int = 500,
        linger_s: float = 5.0,
    ) -> None:
        self._client = client
        self._decode = decode
        self._read_now = read_now  # a non-blocking read: (stream, after, count) -> events
        self._max_block_ms = max_block_ms
        self._buffer_len = buffer_len
        self._linger_s = linger_s
        self._streams: dict[bytes, _Followed] = {}  # keys as sent and as replied: bytes
        self._wake_key = f"cf:relay:{uuid.uuid4().hex}:wake".encode()
        self._wake_id = b"0-0"
        self._wake_sent = False
        self._read_number = 0  # of the XREAD in flight, or the next one
        self._in_flight = False
        self._forgotten_at = 0.0
        self._task: asyncio.Task | None = None

    async def read(self, stream: str, *, after: int, block_ms: int, count: int) -> list[Event]:
        key = stream.encode()
        followed = self._streams.get(key)
        now = time.monotonic()
        if followed is None:
            followed = self._streams[key] = _Followed(cursor=after, base=after, last_wanted=now)
        followed.last_wanted = now
        if followed.base <= after < followed.cursor:
            events = _after(followed.buffer, after, count)  # arrived while the reader was away
            self._release(followed, after)
            return events
        self._release(followed, after)
        if after < followed.base:
            # Older than the buffer holds (a second reader, a resume from
            # further back): straight from the stream, then wait as anyone.
            events = await self._read_now(stream, after, count)
            if events:
                return events
            # Forgotten meanwhile (a read that took longer than linger_s)?
            followed = self._streams.setdefault(key, followed)
        loop = asyncio.get_running_loop()
        waiter = _Waiter(after=after, count=count, future=loop.create_future())
        followed.waiters.append(waiter)
        # One timer on the waiter's own future, not asyncio.wait_for (which
        # adds a second future and callbacks): a reader waits once per event
        # relayed, thousands of times a second in a busy web process.
        timer = loop.call_later(block_ms / 1000, _time_out, waiter.future)
        try:
            self._cover(followed, after)
            return await waiter.future
        finally:
            timer.cancel()
            if waiter in followed.waiters:
                followed.waiters.remove(waiter)

    @staticmethod
    def _release(followed: _Followed, after: int) -> None:
        """A reader asking for ``seq > after`` is done with what came before:
        the buffer keeps only what it has not had. (Another reader of the
        same stream in this process that is further behind then reads from
        the stream itself: correct, one command dearer.)"""
        keep_from = min(after, followed.cursor)
        if keep_from > followed.base:
            followed.buffer = [event for event in followed.buffer if event["seq"] > keep_from]
            followed.base = keep_from

    def _cover(self, followed: _Followed, after: int) -> None:
        """Make sure an ``XREAD`` that can return this stream's entries after
        ``after`` is in flight or next."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="event-log-follower")
            return
        if not self._in_flight:
            return  # between reads: the next one names the stream
        if followed.read_number == self._read_number and followed.read_from <= after:
            return  # the read in flight returns as soon as the stream has more
        self._wake()

    def _wake(self) -> None:
        if self._wake_sent:
            return
        self._wake_sent = True
        asyncio.get_running_loop().create_task(self._send_wake(), name="event-log-follower-wake")

    async def _send_wake(self) -> None:
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.xadd(self._wake_key, {"w": "1"}, maxlen=1, approximate=False)
                pipe.expire(self._wake_key, _WAKE_TTL_S)
                await pipe.execute()
        except Exception as exc:  # the read in flight fails too, and its readers retry
            self._wake_sent = False
            logger.warning("waking the event log follower failed: %s", exc)

    async def _run(self) -> None:
        try:
            while True:
                self._forget_unwanted()
                if not self._streams:
                    return
                self._read_number += 1
                streams: dict[bytes, bytes] = {}
                for key, followed in self._streams.items():
                    followed.read_from, followed.read_number = followed.cursor, self._read_number
                    streams[key] = b"0-%d" % followed.cursor
                streams[self._wake_key] = self._wake_id
                self._in_flight = True
                try:
                    reply = await self._client.xread(streams, count=self._buffer_len, block=self._max_block_ms)
                except Exception as exc:
                    self._fail_waiters(exc)  # they retry, which starts a new reader
                    return
                finally:
                    self._in_flight = False
                self._take(reply or [])
                if len(self._streams) >= _GATHER_FROM_STREAMS:
                    await asyncio.sleep(min(_GATHER_MAX_S, len(self._streams) * _GATHER_S_PER_STREAM))
        finally:
            self._task = None if self._task is asyncio.current_task() else self._task

    def _take(self, reply: list) -> None:
        for key, entries in reply:
            if key == self._wake_key:
                self._wake_id = entries[-1][0]
                self._wake_sent = False
                continue
            followed = self._streams.get(key)
            if followed is None or not entries:
                continue
            events = self._decode(entries)
            followed.buffer.extend(events)
            followed.cursor = events[-1]["seq"]
            if len(followed.buffer) > self._buffer_len:
                dropped = len(followed.buffer) - self._buffer_len
                followed.base = followed.buffer[dropped - 1]["seq"]
                del followed.buffer[:dropped]
            for waiter in list(followed.waiters):
                events_after = _after(followed.buffer, waiter.after, waiter.count)
                if events_after and not waiter.future.done():
                    waiter.future.set_result(events_after)
                    followed.waiters.remove(waiter)

    def _forget_unwanted(self) -> None:
        now = time.monotonic()
        if now - self._forgotten_at < _FORGET_EVERY_S:
            return
        self._forgotten_at = now
        oldest = now - self._linger_s
        for key in [k for k, f in self._streams.items() if not f.waiters and f.last_wanted < oldest]:
            del self._streams[key]

    def _fail_waiters(self, exc: BaseException) -> None:
        for followed in self._streams.values():
            for waiter in followed.waiters:
                if not waiter.future.done():
                    waiter.future.set_exception(exc)
            followed.waiters.clear()
