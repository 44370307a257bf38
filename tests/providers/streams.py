"""Reading an adapter's stream in tests: the deltas, then exactly one result."""

from __future__ import annotations

from collections.abc import Iterator

from chatforge.llm.providers.base import StreamItem, TextDelta, TurnResult


def collect(items: Iterator[StreamItem]) -> tuple[list[StreamItem], TurnResult]:
    collected = list(items)
    result = collected[-1]
    assert isinstance(result, TurnResult)
    assert not any(isinstance(item, TurnResult) for item in collected[:-1])
    return collected[:-1], result


def texts(items: list[StreamItem]) -> list[str]:
    return [item.text for item in items if isinstance(item, TextDelta)]
