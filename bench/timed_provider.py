"""The fake OpenAI server of the tests, with its own clock on each request.

``tests/fakes/openai_server.py`` records request bodies but not when they
arrived. The benchmark needs the provider's view of time: when a model
request arrived (``POST → first model request``, the tool round gap) and
when the provider finished sending a turn's stream (``model turn done``).
This subclass notes both, keyed by the run's user message (each benchmark
run sends a unique one) and the request's round, on ``time.time()`` — the
same clock the benchmark's client uses for the POST.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from tests.fakes.openai_server import FakeOpenAIServer, _Handler, last_user_text, round_of


@dataclass(frozen=True)
class Request:
    tag: str  # the run's user message
    round: int  # assistant tool-call turns before this request
    arrived_at: float  # the request's body was read (time.time())
    done_at: float | None  # the whole answer was written, or None (still streaming, or failed)


class _TimedHandler(_Handler):
    def _answer_chat(self, body: dict[str, Any]) -> None:
        try:
            super()._answer_chat(body)
        finally:
            self.fake._note_done(body)


class TimedFakeOpenAIServer(FakeOpenAIServer):
    """``FakeOpenAIServer`` that also keeps, per chat request, its arrival
    time and the time its answer was fully written. Request bodies are not
    kept (the parent's copy of each body is dropped), so thousands of
    requests cost little memory."""

    handler = _TimedHandler

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._times_lock = threading.Lock()
        self._arrived: dict[tuple[str, int], list[float]] = {}
        self._done: dict[tuple[str, int], list[float]] = {}

    def _record(self, entry: Any, headers: dict[str, str] | None = None) -> None:
        now = time.time()
        key = (last_user_text(entry), round_of(entry)) if isinstance(entry, dict) else ("", 0)
        with self._times_lock:
            self._arrived.setdefault(key, []).append(now)

    def _note_done(self, body: dict[str, Any]) -> None:
        now = time.time()
        with self._times_lock:
            self._done.setdefault((last_user_text(body), round_of(body)), []).append(now)

    def requests_of(self, tag: str) -> list[Request]:
        """The requests of the run whose user message is ``tag``, by round
        (the first arrival of each round, and when its answer was done)."""
        with self._times_lock:
            keys = sorted(k for k in self._arrived if k[0] == tag)
            return [
                Request(tag=tag, round=k[1], arrived_at=self._arrived[k][0],
                        done_at=(self._done.get(k) or [None])[0])
                for k in keys
            ]

    def forget(self) -> None:
        with self._times_lock:
            self._arrived.clear()
            self._done.clear()
