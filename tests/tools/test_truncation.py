"""Tool outputs sent to the model are cut to the configured limit, saying so."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tools import executor
from tools.executor import DEFAULT_OUTPUT_LIMIT, ToolResult, configure_output_limit, output_limit


@pytest.fixture(autouse=True)
def _restore_limit() -> Iterator[None]:
    yield
    configure_output_limit(DEFAULT_OUTPUT_LIMIT)


def _success(result: Any) -> ToolResult:
    return ToolResult(tool_name="t", status="success", result=result)


def test_default_limit() -> None:
    assert output_limit() == DEFAULT_OUTPUT_LIMIT == 20_000


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        pytest.param("short", "short", id="string-as-is"),
        pytest.param("x" * 100, "x" * 100, id="exactly-the-limit"),
        pytest.param({"a": "é"}, '{"a":"é"}', id="object-as-json"),
    ],
)
def test_within_the_limit_unchanged(result: Any, expected: str) -> None:
    configure_output_limit(100)
    assert _success(result).output_text() == expected


@pytest.mark.parametrize("limit", [100, 1000, 20_000])
@pytest.mark.parametrize("result", ["x" * 123_456, {"items": ["y" * 50] * 3000}])
def test_cut_to_the_limit_with_a_marker(limit: int, result: Any) -> None:
    configure_output_limit(limit)
    full = _success(result)._full_text()
    text = _success(result).output_text()
    assert len(text) <= limit
    head, marker = text.split("\n…[output truncated: ")
    assert full.startswith(head)
    assert marker == f"{len(full)} characters in total, showing the first {len(head)}]"


def test_marker_text() -> None:
    configure_output_limit(20_000)
    text = _success("z" * 123_456).output_text()
    shown = len(text) - len(text.split("\n…")[1]) - 2
    assert text.endswith(f"\n…[output truncated: 123456 characters in total, showing the first {shown}]")


def test_limit_smaller_than_the_marker_cuts_bare() -> None:
    configure_output_limit(10)
    assert _success("abcdefghijklmnop").output_text() == "abcdefghij"


def test_errors_are_limited_too() -> None:
    configure_output_limit(200)
    result = ToolResult(tool_name="t", status="error", error="E" * 500)
    assert len(result.output_text()) <= 200
    assert "[output truncated: 500 characters" in result.output_text()


def test_result_keeps_the_whole_value() -> None:
    configure_output_limit(50)
    result = _success("w" * 500)
    assert result.result == "w" * 500
    assert result.as_dict()["result"] == "w" * 500


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "100"])
def test_refuses_a_bad_limit(bad: Any) -> None:
    with pytest.raises(ValueError):
        configure_output_limit(bad)
    assert executor.output_limit() == DEFAULT_OUTPUT_LIMIT
