"""Streaming deltas of one model turn, merged when they arrive close together.

Providers often deliver several chunks within a millisecond or two (one TCP
read holds many SSE lines). Each ``content.delta`` is a Redis round trip for
the worker and a websocket frame for every client, so at hundreds of
concurrent streams the relay spends its time on tiny events. Here a delta
that arrives less than ``window`` after the last publish of its turn waits,
and the text that gathers meanwhile goes out as one event of the same type:
the event contract does not change, only how finely the text is cut.

The delay is bounded: a delta is published at once if the turn published
nothing within the window; a waiting delta goes out when the next one
arrives after the window, when a delta of the other kind arrives, when the
stream ends, or, if the stream goes quiet, within half a window after the
window by a flusher thread (one per process, asleep while no turn has
waiting text). A delta therefore waits at most about 1.5 × the window
(``CHATFORGE_DELTA_COALESCE_MS``, 10 ms; 0 publishes every delta at once).

An event log failure in the flusher is kept and raised in the streaming
loop at its next delta (or at the end), where it hands the turn back like
any other infrastructure failure.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)

Publish = Callable[[str, str], None]  # (kind, text): kind is "content" or "reasoning"


class DeltaCoalescer:
    def __init__(self, publish: Publish, *, window_s: float, flusher: _Flusher | None = None) -> None:
        self._publish = publish
        self._window_s = window_s
        self._flusher = flusher
        self._lock = threading.Lock()
        self._kind = ""
        self._parts: list[str] = []
        self._waiting_since = 0.0
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

    def add(self, kind: str, text: str) -> None:
        """A delta from the provider: published now, or held for at most the window."""
        self._raise_kept_error()
        now = time.monotonic()
        with self._lock:
            if self._parts and kind != self._kind:
                self._send_locked()
            if not self._parts and now - self._published_at >= self._window_s:
                self._kind, self._parts = kind, [text]
                self._send_locked()
                return
            if not self._parts:
                self._kind, self._waiting_since = kind, now
            self._parts.append(text)
            if now - self._waiting_since >= self._window_s:
                self._send_locked()
        if self._parts and self._flusher is not None:
            self._flusher.wake()

    def flush(self) -> None:
        """Publish whatever waits (the stream ended, or another event follows)."""
        with self._lock:
            if self._parts:
                self._send_locked()
        self._raise_kept_error()

    def flush_if_due(self, now: float) -> None:
        """The flusher's call: publish text that has waited a whole window."""
        with self._lock:
            if not self._parts or now - self._waiting_since < self._window_s:
                return
            try:
                self._send_locked()
            except Exception as exc:  # noqa: BLE001 - raised in the streaming loop instead
                self._error = exc

    @property
    def waiting(self) -> bool:
        return bool(self._parts)

    def _send_locked(self) -> None:
        text, kind = "".join(self._parts), self._kind
        self._parts = []
        self._published_at = time.monotonic()
        self._publish(kind, text)

    def _raise_kept_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error


class _Flusher:
    """One thread per process that publishes held text once it is due. It
    sleeps on an event while no registered turn holds text, so an idle
    worker spends nothing on it."""

    def __init__(self, tick_s: float) -> None:
        self._tick_s = tick_s
        self._coalescers: set[DeltaCoalescer] = set()
        self._registry = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def register(self, coalescer: DeltaCoalescer) -> None:
        with self._registry:
            self._coalescers.add(coalescer)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="delta-flusher", daemon=True)
                self._thread.start()

    def unregister(self, coalescer: DeltaCoalescer) -> None:
        with self._registry:
            self._coalescers.discard(coalescer)

    def wake(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            time.sleep(self._tick_s)
            with self._registry:
                coalescers = list(self._coalescers)
            now = time.monotonic()
            for coalescer in coalescers:
                coalescer.flush_if_due(now)
            if not any(c.waiting for c in coalescers):
                self._wake.clear()
                # A delta held between the check and the clear sets it again.
                if any(c.waiting for c in coalescers):
                    self._wake.set()


_flushers: dict[float, _Flusher] = {}
_flushers_lock = threading.Lock()


def coalescer_for(publish: Publish, *, window_ms: float) -> DeltaCoalescer:
    """A coalescer for one turn, sharing the process's flusher."""
    window_s = max(0.0, window_ms / 1000)
    if window_s == 0:
        return DeltaCoalescer(publish, window_s=0.0)
    with _flushers_lock:
        flusher = _flushers.get(window_s)
        if flusher is None:
            flusher = _flushers[window_s] = _Flusher(tick_s=window_s / 2)
    return DeltaCoalescer(publish, window_s=window_s, flusher=flusher)
