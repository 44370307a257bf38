"""Streaming deltas of model turns, merged into fewer events as load grows.

Real models stream 50–200 tokens a second, one SSE chunk per token. Each
``content.delta`` costs the worker an event-log append, then a read, a
decode and a websocket frame in every process and client that follows the
run: at 100 turns of 50 tokens/s, one event per token kept a worker and a
web process behind by a second and more (docs/performance.md, "Live text
at real model speed"). So a turn publishes **at most one delta event per
window**: a delta arriving a window or more after the turn's last publish
goes out at once (so does a turn's first); one arriving sooner waits, with
whatever else arrives, until a window has passed since that publish, and
then goes out as one event of the same type. The event contract does not
change (seqs contiguous, the text exact and in order); only how finely the
text is cut.

**The window adapts to the process's load**: it is the number of turns
streaming in this process divided by ``CHATFORGE_DELTA_EVENTS_PER_S`` (the
delta events a process aims to publish a second), never below
``CHATFORGE_DELTA_COALESCE_MS`` nor above ``CHATFORGE_DELTA_COALESCE_MAX_MS``.
One turn alone gets the narrow window (10 ms: nothing merged at 50
tokens/s); 50 turns in one process at the defaults (1,250 events a second)
get 40 ms (two tokens an event at 50 tokens/s, eight at 200), 100 turns
80 ms; the maximum (100 ms) is the stated bound on how long any delta
waits.

Held text is let go when the next delta arrives past the window, when a
delta of the other kind arrives (reasoning and content never merge, and
keep their order), when the stream ends, or — the stream being quiet — when
its window passes. **While turns stream, only the process's flusher thread
publishes**: every pass sends all the text the turns let go since the last
one, and every held text whose window has passed, in one call (one
pipeline to the event log); passes are at least 2 ms apart. So a turn
never waits on Redis while it streams (each wait was a lock, an event and
two switches per delta in a gevent worker), a process's deltas reach Redis
in a few pipelines a pass instead of one round trip each, and a delta
waits at most its window plus about 2 ms. At the end of its stream a turn
publishes itself whatever the flusher has not taken (a turn ending alone
would otherwise wait for the next pass, every time), or waits for the
flusher to finish what it has: either way all its text is in the log
before the turn publishes anything else.

An event-log failure in the flusher is kept and raised in the streaming
loop at its next delta (or at the end), where it hands the turn back like
any other infrastructure failure.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Delta:
    """Text to publish: ``target`` says where (the run), ``kind`` is
    "content" or "reasoning"."""

    target: Any
    kind: str
    text: str


PublishMany = Callable[[Sequence[Delta]], None]
Clock = Callable[[], float]

# Times closer than this count as equal (sums of float seconds drift by
# far less; without it a delta exactly a window later could wait another).
_EPSILON_S = 1e-6
# Held text is sent by its own turn when a delta arrives this share of the
# window before it is due, rather than left to the flusher a moment later.
_EARLY = 1 / 8


@dataclass(frozen=True)
class WindowPolicy:
    """How long a turn waits between delta events, given the turns
    streaming in the process."""

    min_s: float
    max_s: float
    events_per_s: float

    @classmethod
    def from_ms(cls, *, min_ms: float, max_ms: float, events_per_s: float) -> WindowPolicy:
        min_s = max(0.0, min_ms / 1000)
        return cls(min_s=min_s, max_s=max(min_s, max_ms / 1000), events_per_s=max(0.0, events_per_s))

    @property
    def merges(self) -> bool:
        return self.max_s > 0

    def window(self, streaming: int) -> float:
        load = streaming / self.events_per_s if self.events_per_s > 0 else 0.0
        return min(self.max_s, max(self.min_s, load))


class DeltasNotPublished(Exception):
    """The flusher did not publish a turn's deltas in time (it is stuck):
    the turn is handed back like any infrastructure failure."""


class DeltaCoalescer:
    """One turn's deltas (a context manager around its streaming loop).

    With a flusher, the turn never waits on the event log while it streams:
    text ready to go is queued and the flusher publishes it (with every
    other turn's) in its next pass; only ``flush`` — the end of the stream,
    before the turn publishes anything else — waits until all of the turn's
    text is in the log. Without one (no window), each delta is published at
    once by the turn itself."""

    # How long ``flush`` waits for the flusher before giving up on it: longer
    # than the event log's own retries over a Redis blip.
    FLUSH_WAIT_S = 120.0

    def __init__(
        self,
        target: Any,
        publish_many: PublishMany,
        *,
        policy: WindowPolicy,
        flusher: Flusher | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self._target = target
        self._publish_many = publish_many
        self._policy = policy
        self._flusher = flusher
        self._clock = clock
        self._lock = threading.Lock()
        self._kind = ""
        self._parts: list[str] = []  # held text of one kind
        self._queued: list[Delta] = []  # ready, for the flusher's next pass
        self._unpublished = 0  # deltas queued or in the flusher's hands
        self._drained: threading.Event | None = None  # set by the flusher once nothing is unpublished
        self._in_ready = False  # in the flusher's ready list
        self._published_at = float("-inf")  # when the last text was let go
        self._error: BaseException | None = None
        self._discarded = False

    def __enter__(self) -> DeltaCoalescer:
        if self._flusher is not None:
            self._flusher.register(self)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if not self._discarded:
                self.flush()  # also after a provider error: that text was streamed
        except Exception:
            if exc_type is None:
                raise
            logger.warning("held deltas not published while another error ended the stream", exc_info=True)
        finally:
            if self._flusher is not None:
                self._flusher.unregister(self)

    def discard(self) -> None:
        """Drop the text held or queued, and publish nothing more: the turn
        was given to another delivery (this worker was declared lost), whose
        text clients follow instead. A batch already in the flusher's hands
        still goes."""
        with self._lock:
            self._parts = []
            dropped, self._queued = len(self._queued), []
            self._published_locked(dropped)
            self._discarded = True

    def window(self) -> float:
        """The window now: it widens with the turns streaming in the process."""
        streaming = self._flusher.streaming if self._flusher is not None else 1
        return self._policy.window(streaming)

    def add(self, kind: str, text: str) -> None:
        """A delta from the provider: let go now, or held for at most a window."""
        self._raise_kept_error()
        if self._flusher is None:
            self._publish_many([Delta(self._target, kind, text)])
            return
        now = self._clock()
        window = self.window()
        ready = False
        due: float | None = None
        with self._lock:
            if self._parts and kind != self._kind:
                self._let_go_locked(now)
                ready = True
            if not self._parts:
                self._kind = kind
            self._parts.append(text)
            if now - self._published_at >= window * (1 - _EARLY) - _EPSILON_S:
                # Due (or nearly: a model's tokens come at a steady pace, a
                # little early or late): no need to wait for the flusher's timer.
                self._let_go_locked(now)
                ready = True
            elif len(self._parts) == 1:
                due = self._published_at + window
        if ready:
            self._flusher.ready(self)
        if due is not None:
            self._flusher.schedule(self, due)

    def flush(self) -> None:
        """Publish whatever waits and return once all of it is in the log (the
        stream ended, or another event follows)."""
        if self._flusher is None:
            self._raise_kept_error()
            return
        mine: list[Delta] = []
        drained = None
        with self._lock:
            if self._parts:
                self._let_go_locked(self._clock())
            if self._unpublished and self._unpublished == len(self._queued):
                # Nothing of ours is in the flusher's hands: publish the rest
                # here rather than wait for its next pass (up to 2 ms apart),
                # which a turn ending alone would wait for every time.
                mine, self._queued = self._queued, []
            elif self._unpublished:
                drained = self._drained = threading.Event()
        if mine:
            self._raise_kept_error()
            try:
                self._publish_many(mine)
            finally:
                with self._lock:
                    self._published_locked(len(mine))
        elif drained is not None:
            self._flusher.ready(self)
            if not self._flusher.background:
                self._flusher.flush_due()  # no thread to do it (tests)
            if not drained.wait(self.FLUSH_WAIT_S):
                raise DeltasNotPublished(f"deltas not published within {self.FLUSH_WAIT_S:.0f} s")
        self._raise_kept_error()

    @property
    def waiting(self) -> bool:
        """Text held or not yet published."""
        return bool(self._parts) or self._unpublished > 0

    def _let_go_locked(self, now: float) -> None:
        self._queued.append(Delta(self._target, self._kind, "".join(self._parts)))
        self._unpublished += 1
        self._parts = []
        self._published_at = now

    def _take_locked(self, now: float) -> tuple[list[Delta], float | None]:
        """The flusher's pass, under the lock: what is queued, with the held
        text if its window has passed; and when to look again if held text
        is not due yet (the window widened meanwhile)."""
        later = None
        if self._parts:
            due = self._published_at + self.window()
            if now >= due - _EPSILON_S:
                self._let_go_locked(now)
            else:
                later = due
        taken, self._queued = self._queued, []
        return taken, later

    def _published_locked(self, count: int) -> None:
        self._unpublished -= count
        if self._unpublished == 0 and self._drained is not None:
            self._drained.set()
            self._drained = None

    def _raise_kept_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error


class Flusher:
    """One thread per process (and publisher) that publishes the turns'
    deltas: what turns let go, and held text once its window has passed,
    all of one pass in one ``publish_many`` call.

    It sleeps until a turn has text ready or the earliest held text falls
    due (a heap), indefinitely while neither, so an idle worker spends
    nothing on it; passes are at least ``pass_every_s`` apart, so that
    what turns let go meanwhile goes together. It also counts the turns
    streaming, which sets the window."""

    def __init__(
        self,
        publish_many: PublishMany,
        *,
        clock: Clock = time.monotonic,
        pass_every_s: float = 0.002,
        background: bool = True,
    ) -> None:
        """``background=False``: no thread; the owner calls ``flush_due``
        (tests, which move a fake clock)."""
        self._publish_many = publish_many
        self._clock = clock
        self._pass_every_s = pass_every_s
        self._background = background
        self._last_pass = float("-inf")
        self._lock = threading.Lock()
        self._due: list[tuple[float, int, DeltaCoalescer]] = []
        self._ready: list[DeltaCoalescer] = []
        self._order = itertools.count()
        self._streaming: set[DeltaCoalescer] = set()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def streaming(self) -> int:
        return len(self._streaming)

    @property
    def background(self) -> bool:
        return self._background

    def register(self, coalescer: DeltaCoalescer) -> None:
        with self._lock:
            self._streaming.add(coalescer)
            if self._background and (self._thread is None or not self._thread.is_alive()):
                self._thread = threading.Thread(target=self._run, name="delta-flusher", daemon=True)
                self._thread.start()

    def unregister(self, coalescer: DeltaCoalescer) -> None:
        with self._lock:
            self._streaming.discard(coalescer)

    def ready(self, coalescer: DeltaCoalescer) -> None:
        """``coalescer`` has text to publish now."""
        with self._lock:
            if coalescer._in_ready:
                return
            coalescer._in_ready = True
            self._ready.append(coalescer)
        self._wake.set()

    def schedule(self, coalescer: DeltaCoalescer, due: float) -> None:
        """``coalescer`` holds text until ``due``."""
        with self._lock:
            heapq.heappush(self._due, (due, next(self._order), coalescer))
            earliest = self._due[0][2] is coalescer
        if earliest:
            self._wake.set()

    def flush_due(self) -> int:
        """One pass: publish what is ready and every held text whose window
        has passed, in one call; how many deltas it published. (The
        thread's step; tests call it too.)"""
        now = self._clock()
        with self._lock:
            turns, self._ready = self._ready, []
            for turn in turns:
                turn._in_ready = False
            listed = set(turns)
            while self._due and self._due[0][0] <= now + _EPSILON_S:
                _, _, turn = heapq.heappop(self._due)
                if turn not in listed:
                    listed.add(turn)
                    turns.append(turn)
        batch: list[Delta] = []
        taken: list[tuple[DeltaCoalescer, int]] = []
        for turn in turns:
            with turn._lock:
                deltas, later = turn._take_locked(now)
            if later is not None:
                self.schedule(turn, later)
            if deltas:
                batch.extend(deltas)
                taken.append((turn, len(deltas)))
        if not batch:
            return 0
        error: BaseException | None = None
        try:
            self._publish_many(batch)
        except Exception as exc:  # noqa: BLE001 - raised in each turn's streaming loop instead
            error = exc
        for turn, count in taken:
            with turn._lock:
                if error is not None:
                    turn._error = error
                turn._published_locked(count)
        return len(batch)

    def next_pass_in(self) -> float | None:
        """Seconds until the next pass is due (None: nothing to publish)."""
        with self._lock:
            if self._ready:
                wait = 0.0
            elif self._due:
                wait = self._due[0][0] - self._clock()
            else:
                return None
        return max(wait, self._last_pass + self._pass_every_s - self._clock())

    def _run(self) -> None:
        while True:
            wait = self.next_pass_in()
            if wait is None or wait > 0:
                self._wake.wait(wait)
                # Cleared before the lists are looked at again: a ready() or
                # schedule() after this point sets it anew and is seen next.
                self._wake.clear()
                continue
            self._last_pass = self._clock()
            try:
                self.flush_due()
            except Exception:  # a bug must not stop every turn's publishing
                logger.exception("delta flusher failed")


_flushers: dict[PublishMany, Flusher] = {}
_flushers_lock = threading.Lock()


def flusher_for(publish_many: PublishMany) -> Flusher:
    """The process's flusher for this publisher (one thread, made on first use)."""
    with _flushers_lock:
        flusher = _flushers.get(publish_many)
        if flusher is None:
            flusher = _flushers[publish_many] = Flusher(publish_many)
        return flusher


def coalescer_for(target: Any, publish_many: PublishMany, *, policy: WindowPolicy) -> DeltaCoalescer:
    """A coalescer for one turn, sharing the process's flusher; without a
    window (``max`` 0) every delta is published at once."""
    if not policy.merges:
        return DeltaCoalescer(target, publish_many, policy=policy)
    return DeltaCoalescer(target, publish_many, policy=policy, flusher=flusher_for(publish_many))
