"""Deltas that arrive together go out as one event; none is held longer
than the bound, none is lost or reordered, and a failure in the flusher
reaches the streaming loop."""

from __future__ import annotations

import threading
import time

import pytest

from orchestration.services.delta_coalescer import DeltaCoalescer, coalescer_for

WINDOW_MS = 40  # wide enough that "together" is unambiguous on a busy machine


class Sink:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, float]] = []
        self.lock = threading.Lock()

    def __call__(self, kind: str, text: str) -> None:
        with self.lock:
            self.events.append((kind, text, time.monotonic()))

    def texts(self) -> list[tuple[str, str]]:
        return [(kind, text) for kind, text, _ in self.events]


def test_a_burst_becomes_one_event_after_the_first():
    sink = Sink()
    with coalescer_for(sink, window_ms=WINDOW_MS) as deltas:
        for word in ["a", "b", "c", "d"]:
            deltas.add("content", word)
    assert sink.texts() == [("content", "a"), ("content", "bcd")]


def test_a_held_delta_goes_out_without_a_next_one():
    """The stream goes quiet after a burst: the flusher sends the held text."""
    sink = Sink()
    with coalescer_for(sink, window_ms=WINDOW_MS) as deltas:
        deltas.add("content", "first")
        held_at = time.monotonic()
        deltas.add("content", "second")
        deadline = time.monotonic() + 5
        while len(sink.events) < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert sink.texts() == [("content", "first"), ("content", "second")]
        assert sink.events[1][2] - held_at >= WINDOW_MS / 1000 * 0.9  # held for the window, then sent


def test_kinds_are_never_merged_and_keep_their_order():
    sink = Sink()
    with coalescer_for(sink, window_ms=WINDOW_MS) as deltas:
        deltas.add("reasoning", "think ")
        deltas.add("reasoning", "more ")
        deltas.add("content", "An")
        deltas.add("content", "swer")
    assert sink.texts() == [("reasoning", "think "), ("reasoning", "more "), ("content", "Answer")]


def test_spaced_deltas_are_published_at_once():
    sink = Sink()
    with coalescer_for(sink, window_ms=WINDOW_MS) as deltas:
        for word in ["x", "y"]:
            deltas.add("content", word)
            assert sink.texts()[-1] == ("content", word)
            time.sleep(WINDOW_MS / 1000 * 1.5)


def test_zero_window_publishes_every_delta():
    sink = Sink()
    with coalescer_for(sink, window_ms=0) as deltas:
        for word in ["a", "b", "c"]:
            deltas.add("content", word)
    assert sink.texts() == [("content", "a"), ("content", "b"), ("content", "c")]


def test_a_failure_in_the_flusher_is_raised_in_the_streaming_loop():
    class Unreachable(Exception):
        pass

    calls = []

    def failing(kind: str, text: str) -> None:
        calls.append(text)
        if len(calls) > 1:
            raise Unreachable("event log down")

    deltas = coalescer_for(failing, window_ms=WINDOW_MS)
    with pytest.raises(Unreachable), deltas:
        deltas.add("content", "sent")
        deltas.add("content", "held")  # the flusher's publish fails
        deadline = time.monotonic() + 5
        while len(calls) < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        deltas.add("content", "next")


def test_many_turns_at_once_lose_nothing():
    sinks = [Sink() for _ in range(20)]

    def stream(sink: Sink) -> None:
        with coalescer_for(sink, window_ms=5) as deltas:
            for i in range(200):
                deltas.add("content", f"{i},")
                if i % 17 == 0:
                    time.sleep(0.002)

    threads = [threading.Thread(target=stream, args=(sink,)) for sink in sinks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    expected = "".join(f"{i}," for i in range(200))
    for sink in sinks:
        assert "".join(text for _, text in sink.texts()) == expected
        assert len(sink.events) < 200


def test_without_a_flusher_the_end_of_the_stream_sends_what_is_held():
    sink = Sink()
    with DeltaCoalescer(sink, window_s=10.0) as deltas:
        deltas.add("content", "a")
        deltas.add("content", "b")
    assert sink.texts() == [("content", "a"), ("content", "b")]
