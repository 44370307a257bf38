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

Waiting text goes out when the next delta arrives past the window, when a
delta of the other kind arrives (reasoning and content never merge, and
keep their order), when the stream ends, or — the stream being quiet — when
its window passes: then the process's *flusher* thread publishes every turn
whose window has passed, all in one call (one pipeline to the event log;
its passes are at least 5 ms apart, so that what falls due meanwhile goes
together), so a delta waits at most the window plus about 5 ms.

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


class DeltaCoalescer:
    """One turn's deltas (a context manager around its streaming loop)."""

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
        self._parts: list[str] = []
        self._published_at = float("-inf")
        self._error: BaseException | None = None

    def __enter__(self) -> DeltaCoalescer:
        if self._flusher is not None:
            self._flusher.register(self)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._flusher is not None:
            self._flusher.unregister(self)
        try:
            self.flush()  # also after a provider error: that text was streamed
        except Exception:
            if exc_type is None:
                raise
            logger.warning("held deltas not published while another error ended the stream", exc_info=True)

    def window(self) -> float:
        """The window now: it widens with the turns streaming in the process."""
        streaming = self._flusher.streaming if self._flusher is not None else 1
        return self._policy.window(streaming)

    def add(self, kind: str, text: str) -> None:
        """A delta from the provider: published now, or held for at most a window."""
        self._raise_kept_error()
        now = self._clock()
        window = self.window()
        due: float | None = None
        with self._lock:
            if self._parts and kind != self._kind:
                self._send_locked(now)
            if not self._parts:
                self._kind = kind
                if now - self._published_at >= window - _EPSILON_S:
                    self._parts = [text]
                    self._send_locked(now)
                    return
                due = self._published_at + window
            self._parts.append(text)
            if due is None and now - self._published_at >= window * (1 - _EARLY) - _EPSILON_S:
                # Due (or nearly: a model's tokens come at a steady pace, a
                # little early or late): the turn sends it itself, and the
                # flusher finds nothing to do.
                self._send_locked(now)
        if due is not None and self._flusher is not None:
            self._flusher.schedule(self, due)

    def flush(self) -> None:
        """Publish whatever waits (the stream ended, or another event follows)."""
        with self._lock:
            if self._parts:
                self._send_locked(self._clock())
        self._raise_kept_error()

    @property
    def waiting(self) -> bool:
        return bool(self._parts)

    def _take_locked(self, now: float) -> Delta:
        delta = Delta(self._target, self._kind, "".join(self._parts))
        self._parts = []
        self._published_at = now
        return delta

    def _send_locked(self, now: float) -> None:
        self._publish_many([self._take_locked(now)])

    def _take_if_due_locked(self, now: float) -> tuple[Delta | None, float | None]:
        """The flusher's look, under the lock: the text to publish now, or
        when to look again (the window widened meanwhile), or neither."""
        if not self._parts:
            return None, None
        due = self._published_at + self.window()
        if now < due - _EPSILON_S:
            return None, due
        return self._take_locked(now), None

    def _raise_kept_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error


class Flusher:
    """One thread per process (and publisher) that publishes held text once
    its window has passed, every due turn in one ``publish_many`` call.

    It sleeps until the earliest due time of the turns holding text (a
    heap), or indefinitely while none does, so an idle worker spends
    nothing on it; it also counts the turns streaming, which sets the
    window."""

    # A turn whose own thread is publishing when the flusher comes for it is
    # looked at again this much later (its publish usually takes the text).
    RETRY_S = 0.002

    def __init__(
        self,
        publish_many: PublishMany,
        *,
        clock: Clock = time.monotonic,
        pass_every_s: float = 0.005,
        background: bool = True,
    ) -> None:
        """``background=False``: no thread; the owner calls ``flush_due``
        (tests, which move a fake clock)."""
        self._publish_many = publish_many
        self._clock = clock
        self._background = background
        # Passes are at least this far apart: the texts falling due within
        # it go out together, in one call, instead of one wake-up each.
        self._pass_every_s = pass_every_s
        self._last_pass = float("-inf")
        self._lock = threading.Lock()
        self._due: list[tuple[float, int, DeltaCoalescer]] = []
        self._order = itertools.count()
        self._streaming: set[DeltaCoalescer] = set()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def streaming(self) -> int:
        return len(self._streaming)

    def register(self, coalescer: DeltaCoalescer) -> None:
        with self._lock:
            self._streaming.add(coalescer)
            if self._background and (self._thread is None or not self._thread.is_alive()):
                self._thread = threading.Thread(target=self._run, name="delta-flusher", daemon=True)
                self._thread.start()

    def unregister(self, coalescer: DeltaCoalescer) -> None:
        with self._lock:
            self._streaming.discard(coalescer)

    def schedule(self, coalescer: DeltaCoalescer, due: float) -> None:
        with self._lock:
            heapq.heappush(self._due, (due, next(self._order), coalescer))
            earliest = self._due[0][2] is coalescer
        if earliest:
            self._wake.set()

    def flush_due(self) -> int:
        """Publish every held text whose window has passed, in one call; how
        many turns it published. (The thread's step; tests call it too.)"""
        now = self._clock()
        taken: list[tuple[DeltaCoalescer, Delta]] = []
        with self._lock:
            while self._due and self._due[0][0] <= now + _EPSILON_S:
                _, _, coalescer = heapq.heappop(self._due)
                if not coalescer._lock.acquire(blocking=False):
                    heapq.heappush(self._due, (now + self.RETRY_S, next(self._order), coalescer))
                    continue
                delta, later = coalescer._take_if_due_locked(now)
                if delta is None:
                    coalescer._lock.release()
                    if later is not None:
                        heapq.heappush(self._due, (later, next(self._order), coalescer))
                    continue
                taken.append((coalescer, delta))
        if not taken:
            return 0
        # Each turn's lock is held until its text is published: its own
        # thread cannot publish a later delta ahead of it.
        try:
            self._publish_many([delta for _, delta in taken])
        except Exception as exc:  # noqa: BLE001 - raised in each turn's streaming loop instead
            for coalescer, _ in taken:
                coalescer._error = exc
        finally:
            for coalescer, _ in taken:
                coalescer._lock.release()
        return len(taken)

    def next_due_in(self) -> float | None:
        """Seconds until the earliest held text is due (None: nothing held)."""
        with self._lock:
            return self._due[0][0] - self._clock() if self._due else None

    def _run(self) -> None:
        while True:
            wait = self.next_due_in()
            if wait is not None:
                wait = max(wait, self._last_pass + self._pass_every_s - self._clock())
            if wait is None or wait > 0:
                self._wake.wait(wait)
                # Cleared before the heap is looked at again: a schedule()
                # after this point sets it anew and is seen on the next pass.
                self._wake.clear()
                continue
            self._last_pass = self._clock()
            try:
                self.flush_due()
            except Exception:  # a bug must not stop every turn's flushing
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
