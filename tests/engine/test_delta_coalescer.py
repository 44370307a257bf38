"""A turn publishes at most one delta event per window; the window widens
with the turns streaming in the process; no delta waits longer than its
window (plus the flusher's pass); nothing is lost, repeated or reordered;
only the flusher publishes, every turn's text of a pass in one call; a
turn's end waits until its text is published; and a failure in the
flusher reaches the streaming loop.

Time is a fake clock the tests move, and the flusher's pass
(``Flusher.flush_due``) is called by the test, so no assertion depends on
how fast this machine is. Two tests run the real flusher thread and wait
on events, never on sleeps."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.db import transaction

from orchestration.event_log import events
from orchestration.event_log.delta_coalescer import (
    Delta,
    DeltaCoalescer,
    Flusher,
    WindowPolicy,
    coalescer_for,
)

MS = 0.001


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, ms: float) -> None:
        self.now += ms * MS


class Sink:
    """A publisher that records each call (one call = one round trip) with
    the fake time it happened at."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.calls: list[tuple[float, list[Delta]]] = []
        self.clock = clock
        self.lock = threading.Lock()
        self.published = threading.Event()

    def __call__(self, batch) -> None:
        with self.lock:
            self.calls.append((self.clock() if self.clock else 0.0, list(batch)))
        self.published.set()

    def events(self, target=None) -> list[tuple[str, str]]:
        return [
            (d.kind, d.text) for _, batch in self.calls for d in batch if target is None or d.target == target
        ]

    def text(self, target=None) -> str:
        return "".join(text for _, text in self.events(target))


def policy(min_ms: float = 10, max_ms: float = 100, events_per_s: float = 1000) -> WindowPolicy:
    return WindowPolicy.from_ms(min_ms=min_ms, max_ms=max_ms, events_per_s=events_per_s)


def turn(sink: Sink, clock: Clock, flusher: Flusher | None, target="run", **window) -> DeltaCoalescer:
    return DeltaCoalescer(target, sink, policy=policy(**window), flusher=flusher, clock=clock)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_the_window_widens_with_the_turns_streaming_and_stays_within_its_bounds():
    window = policy(min_ms=10, max_ms=100, events_per_s=1000)
    assert window.window(1) == pytest.approx(0.010)  # a turn alone: the narrow window
    assert window.window(40) == pytest.approx(0.040)  # 40 turns share 1,000 events a second
    assert window.window(5000) == pytest.approx(0.100)  # never beyond the maximum
    assert not policy(min_ms=0, max_ms=0).merges


def test_the_first_delta_goes_out_at_once_and_a_burst_after_it_becomes_one_event(clock):
    sink = Sink(clock)
    flusher = Flusher(sink, clock=clock, background=False)
    with turn(sink, clock, flusher) as deltas:
        for word in ["a", "b", "c", "d"]:
            deltas.add("content", word)
        assert sink.events() == []  # only the flusher publishes
        assert flusher.next_pass_in() == 0  # the first is ready at once
        assert flusher.flush_due() == 1
        assert sink.events() == [("content", "a")]
    assert sink.events() == [("content", "a"), ("content", "bcd")]  # the end of the stream waited for it


def test_tokens_at_a_models_pace_are_merged_once_the_process_is_busy(clock):
    """50 tokens/s (20 ms apart): alone, every token is its own event; with
    40 turns streaming in the process (window 40 ms) two go in each."""
    sink = Sink(clock)
    flusher = Flusher(sink, clock=clock, background=False)  # it publishes every turn's text
    others = [turn(sink, clock, flusher, target=i) for i in range(39)]

    with turn(sink, clock, flusher) as alone:
        for i in range(10):
            alone.add("content", f"{i} ")
            clock.advance(20)
            flusher.flush_due()
    assert len(sink.events()) == 10

    for other in others:
        other.__enter__()
    with turn(sink, clock, flusher, target="busy") as busy:
        assert busy.window() == pytest.approx(0.040)
        for i in range(10):
            busy.add("content", f"{i} ")
            clock.advance(20)
            flusher.flush_due()
    assert sink.text("busy") == "".join(f"{i} " for i in range(10))
    assert len(sink.events("busy")) == 6  # the first at once, then one per 40 ms


def test_no_delta_waits_longer_than_its_window(clock):
    """Tokens at uneven gaps, the flusher stepped every ms: every token is
    published within the window of its arrival."""
    sink = Sink(clock)
    flusher = Flusher(sink, clock=clock, background=False)
    gaps = [1, 3, 7, 30, 2, 2, 2, 45, 9, 1, 60, 5] * 5
    arrived: dict[str, float] = {}
    with turn(sink, clock, flusher, min_ms=25, max_ms=25) as deltas:
        for i, gap in enumerate(gaps):
            arrived[f"<{i}>"] = clock()
            deltas.add("content", f"<{i}>")
            for _ in range(gap):
                clock.advance(1)
                flusher.flush_due()
    published_at = {}
    for at, batch in sink.calls:
        for delta in batch:
            for token in delta.text.replace("><", ">\n<").split("\n"):
                published_at[token] = at
    assert set(published_at) == set(arrived)
    assert max(published_at[t] - arrived[t] for t in arrived) <= 0.025 + 1e-9
    assert len(sink.calls) < len(gaps)


def test_a_quiet_turns_held_text_is_published_by_the_flusher_when_its_window_passes(clock):
    sink = Sink(clock)
    flusher = Flusher(sink, clock=clock, background=False)
    with turn(sink, clock, flusher, min_ms=40, max_ms=40) as deltas:
        deltas.add("content", "first")
        clock.advance(5)
        deltas.add("content", "second")
        clock.advance(34)
        assert flusher.flush_due() == 1 and sink.events() == [("content", "first")]
        assert flusher.next_pass_in() == pytest.approx(0.001)
        clock.advance(1)
        assert flusher.flush_due() == 1
        assert sink.events() == [("content", "first"), ("content", "second")]
        assert flusher.next_pass_in() is None  # nothing held: the flusher sleeps


def test_the_flusher_publishes_every_due_turn_in_one_call(clock):
    sink = Sink(clock)
    flusher = Flusher(sink, clock=clock, background=False)
    turns = [turn(sink, clock, flusher, target=f"run{i}", min_ms=20, max_ms=20) for i in range(5)]
    for i, deltas in enumerate(turns):
        deltas.__enter__()
        deltas.add("content", f"{i}a")
        deltas.add("content", f"{i}b")
    assert flusher.flush_due() == 5  # the five first deltas, in one call
    assert len(sink.calls) == 1
    clock.advance(20)
    assert flusher.flush_due() == 5  # the five held texts, due together
    assert len(sink.calls) == 2
    for i, deltas in enumerate(turns):
        assert sink.text(f"run{i}") == f"{i}a{i}b"
        deltas.__exit__(None, None, None)


def test_kinds_are_never_merged_and_keep_their_order(clock):
    sink = Sink(clock)
    with turn(sink, clock, Flusher(sink, clock=clock, background=False), min_ms=40, max_ms=40) as deltas:
        deltas.add("reasoning", "think ")
        deltas.add("reasoning", "more ")
        deltas.add("content", "An")
        deltas.add("content", "swer")
    assert sink.events() == [("reasoning", "think "), ("reasoning", "more "), ("content", "Answer")]


def test_without_a_window_every_delta_is_published_at_once():
    sink = Sink()
    with coalescer_for("run", sink, policy=policy(min_ms=0, max_ms=0)) as deltas:
        for word in ["a", "b", "c"]:
            deltas.add("content", word)
    assert sink.events() == [("content", "a"), ("content", "b"), ("content", "c")]


def test_a_failure_in_the_flusher_is_raised_in_the_streaming_loop(clock):
    class Unreachable(Exception):
        pass

    calls = []

    def failing(batch) -> None:
        calls.append(batch)
        if len(calls) > 1:
            raise Unreachable("event log down")

    flusher = Flusher(failing, clock=clock, background=False)
    deltas = DeltaCoalescer("run", failing, policy=policy(min_ms=40, max_ms=40), flusher=flusher, clock=clock)
    with pytest.raises(Unreachable), deltas:
        deltas.add("content", "sent")
        flusher.flush_due()
        deltas.add("content", "held")
        clock.advance(40)
        flusher.flush_due()  # its publish fails
        deltas.add("content", "next")


def test_the_end_of_a_stream_publishes_what_the_flusher_has_not_taken_itself(clock):
    """A turn ending alone does not wait for the flusher's next pass: what
    it let go and what it holds go in one call, in order."""
    sink = Sink(clock)
    flusher = Flusher(sink, clock=clock, background=False)  # never stepped here
    with turn(sink, clock, flusher, min_ms=40, max_ms=40) as deltas:
        deltas.add("content", "first ")
        deltas.add("content", "second")
    assert [[(d.kind, d.text) for d in batch] for _, batch in sink.calls] == [
        [("content", "first "), ("content", "second")]
    ]
    assert flusher.flush_due() == 0  # nothing left for it


def test_the_end_of_a_stream_waits_until_the_flusher_has_published_its_text():
    """The real thread: text let go and held when the stream ends is in the
    log when ``flush`` returns, so what the turn publishes next follows it."""
    published = threading.Event()
    release = threading.Event()
    sink = Sink()

    def slow(batch) -> None:
        published.set()
        assert release.wait(10)
        sink(batch)

    deltas = coalescer_for("run", slow, policy=policy(min_ms=20, max_ms=20)).__enter__()
    deltas.add("content", "a")
    deltas.add("content", "b")
    assert published.wait(10)  # the flusher is publishing "a"
    ended = threading.Event()

    def end() -> None:
        deltas.__exit__(None, None, None)
        ended.set()

    threading.Thread(target=end).start()
    assert not ended.wait(0.05)  # waiting for the flusher
    release.set()
    assert ended.wait(10)
    assert sink.text() == "ab"


def test_the_flusher_thread_publishes_held_text_without_a_next_delta():
    """The real thread and clock: the stream goes quiet after a burst."""
    sink = Sink()
    with coalescer_for("run", sink, policy=policy(min_ms=20, max_ms=20)) as deltas:
        deltas.add("content", "first")
        assert sink.published.wait(10), "the flusher never published the first delta"
        sink.published.clear()
        deltas.add("content", "second")  # within the window of the first: held
        assert sink.published.wait(10), "the flusher never published the held text"
        assert sink.events() == [("content", "first"), ("content", "second")]


def test_many_turns_on_threads_lose_nothing_and_keep_their_order():
    sink = Sink()
    start = threading.Barrier(20)

    def stream(target: int) -> None:
        start.wait()
        with coalescer_for(target, sink, policy=policy(min_ms=5, max_ms=5)) as deltas:
            for i in range(300):
                deltas.add("content", f"{i},")

    threads = [threading.Thread(target=stream, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    expected = "".join(f"{i}," for i in range(300))
    for n in range(20):
        assert sink.text(n) == expected
    assert len(sink.events()) < 20 * 300


@pytest.fixture
def log(either_event_log):
    return either_event_log


def texts_of(published) -> list[str]:
    return [e["data"]["text"] for e in published if e["type"] == "content.delta"]


@pytest.mark.django_db(transaction=True)
def test_merged_deltas_keep_seqs_contiguous_and_resume_exactly_across_a_batch_boundary(log, clock):
    """One flusher call carries two runs' merged text; each run's log holds
    contiguous seqs, and a reader resuming after any seq gets exactly the
    text it had not seen."""
    refs = [events.RunRef(run_id=str(uuid.uuid4()), conversation_id="c") for _ in range(2)]
    flusher = Flusher(events.deltas, clock=clock, background=False)
    turns = [
        DeltaCoalescer(ref, events.deltas, policy=policy(min_ms=30, max_ms=30), flusher=flusher, clock=clock)
        for ref in refs
    ]
    words = [f"w{i} " for i in range(12)]
    for deltas in turns:
        deltas.__enter__()
    for i, word in enumerate(words):
        for deltas in turns:
            deltas.add("content", word)
        clock.advance(10)
        if i % 5 == 4:
            flusher.flush_due()
    for deltas in turns:
        deltas.__exit__(None, None, None)
    with transaction.atomic():
        for ref in refs:
            events.run_completed(
                ref, message_id="m", finish_reason="stop", usage={}, max_iterations_reached=False
            )

    for ref in refs:
        published = log.read(ref.run_id, after=0)
        seqs = [e["seq"] for e in published]
        assert seqs == list(range(1, len(seqs) + 1))
        texts = texts_of(published)
        assert "".join(texts) == "".join(words)
        assert len(texts) < len(words)  # merged
        for after in seqs:
            resumed = log.read(ref.run_id, after=after)
            seen = "".join(texts_of(e for e in published if e["seq"] <= after))
            rest = "".join(texts_of(resumed))
            assert seen + rest == "".join(words)
