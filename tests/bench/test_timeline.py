"""bench/timeline.py lines up the client's, the ledger's and the provider's
clocks into segments; what it computes, never how fast anything is."""

from __future__ import annotations

from datetime import UTC, datetime

from bench.run import Sequential
from bench.timed_provider import Request
from bench.timeline import Ledger, run_segments

T0 = 1_800_000_000.0


def at(ms: float) -> datetime:
    return datetime.fromtimestamp(T0 + ms / 1000, UTC)


def test_one_tool_round_is_split_into_its_segments():
    run = Sequential(scenario="s", tag="t", run_id="r", posted_at=T0, post_ms=12.0, e2e_s=0.5)
    ledger = Ledger(
        run=(at(8), at(490)),
        turns=[(0, at(16), at(230), 205), (1, at(250), at(480), 210)],
        calls=[(0, at(240), at(243), 1)],
    )
    requests = {0: Request("t", 0, T0 + 0.025, T0 + 0.227), 1: Request("t", 1, T0 + 0.259, T0 + 0.476)}
    segments = run_segments(run, ledger, requests)
    expected = {
        "POST sent → run row created (web)": 8,
        "POST sent → 202 read (client)": 12,
        "run created → turn 0 claimed": 8,
        "turn 0 claimed → its request at the model": 9,
        "turn 0 answer written → turn recorded": 3,
        "turn 0: in-step time outside the model call": 214 - 205,
        "turn 0 recorded → its call claimed": 10,
        "call 0: in-step time outside the tool": 2,
        "call 0 recorded → turn 1 claimed": 7,
        "turn 1 claimed → its request at the model": 9,
        "turn 1 answer written → turn recorded": 4,
        "turn 1: in-step time outside the model call": 230 - 210,
        "turn 1 recorded → run finished": 10,
        "run finished → run.completed at the client": 10,
        "POST sent → run.completed (end to end)": 500,
    }
    assert list(segments) == list(expected)  # in the order they happen
    assert {name: round(value, 3) for name, value in segments.items()} == expected
