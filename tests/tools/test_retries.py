"""Retries: only transient failures, only for tools that can be safely repeated."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tools import executor
from tools.backoff import backoff_delay
from tools.base import Handler, ToolContext
from tools.errors import ToolArgumentError, ToolError, TransientToolError
from tools.executor import ToolResult, execute_tool
from tests.tools.factories import make_tool, registry_of


@pytest.fixture(autouse=True)
def no_jitter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Always wait the full ceiling, so the recorded delays are predictable."""
    monkeypatch.setattr(executor, "backoff_delay", functools.partial(backoff_delay, rand=lambda: 1.0))


class Recorder:
    """Collects on_retry calls and sleeps instead of waiting."""

    def __init__(self) -> None:
        self.retries: list[tuple[int, str]] = []
        self.sleeps: list[float] = []

    def on_retry(self, failed_attempt: int, error: str) -> None:
        self.retries.append((failed_attempt, error))

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


def failing(times: int, error: Exception, then: Any = "ok") -> tuple[Handler, list[int]]:
    """A handler raising ``error`` on its first ``times`` calls; returns it and its call log."""
    calls: list[int] = []

    def handler(arguments: dict[str, Any], context: ToolContext) -> Any:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return then

    return handler, calls


def run(handler: Handler, recorder: Recorder, **policy: Any) -> ToolResult:
    tool = make_tool(name="flaky", handler=handler, **policy)
    return execute_tool(
        registry_of(tool), "flaky", {}, on_retry=recorder.on_retry, sleep=recorder.sleep
    )


def test_transient_errors_are_retried_with_growing_delays() -> None:
    recorder = Recorder()
    handler, calls = failing(3, TransientToolError("503 from upstream"))

    result = run(handler, recorder, max_attempts=4, backoff_initial_s=0.5, backoff_max_s=8)

    assert result.success and result.result == "ok"
    assert result.attempts == 4 and len(calls) == 4
    text = "Error executing tool 'flaky': 503 from upstream"
    assert recorder.retries == [(1, text), (2, text), (3, text)]
    assert recorder.sleeps == [0.5, 1.0, 2.0]


def test_delays_are_capped() -> None:
    recorder = Recorder()
    handler, _ = failing(10, TransientToolError("down"))

    run(handler, recorder, max_attempts=6, backoff_initial_s=1, backoff_max_s=3)

    assert recorder.sleeps == [1, 2, 3, 3, 3]


def test_gives_up_after_max_attempts_with_the_last_error() -> None:
    recorder = Recorder()
    handler, calls = failing(10, TransientToolError("still down"))

    result = run(handler, recorder, max_attempts=3)

    assert result.status == "error"
    assert result.error == "Error executing tool 'flaky': still down"
    assert not result.retryable_by_model
    assert result.attempts == 3 and len(calls) == 3
    assert [attempt for attempt, _ in recorder.retries] == [1, 2]
    assert len(recorder.sleeps) == 2


@pytest.mark.parametrize(
    "error",
    [ToolArgumentError("bad range"), ToolError("quota exhausted"), ValueError("bug")],
    ids=["argument error", "final error", "unexpected exception"],
)
def test_non_transient_errors_are_never_retried(error: Exception) -> None:
    recorder = Recorder()
    handler, calls = failing(10, error)

    result = run(handler, recorder, max_attempts=5)

    assert result.status == "error"
    assert result.attempts == 1 and len(calls) == 1
    assert recorder.retries == [] and recorder.sleeps == []


def test_invalid_arguments_never_reach_the_handler_or_a_retry() -> None:
    recorder = Recorder()
    handler, calls = failing(0, TransientToolError("unused"))
    tool = make_tool(
        name="strict",
        handler=handler,
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
        max_attempts=5,
    )

    result = execute_tool(
        registry_of(tool), "strict", {"n": "x"}, on_retry=recorder.on_retry, sleep=recorder.sleep
    )

    assert result.retryable_by_model and result.attempts == 0
    assert calls == [] and recorder.retries == []


def test_not_idempotent_tools_are_never_retried() -> None:
    recorder = Recorder()
    handler, calls = failing(10, TransientToolError("connection reset"))

    result = run(handler, recorder, max_attempts=5, side_effects="not_idempotent")

    assert result.error == "Error executing tool 'flaky': connection reset"
    assert result.attempts == 1 and len(calls) == 1
    assert recorder.retries == []


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def hanging_once(release: threading.Event) -> tuple[Handler, list[int]]:
    """A handler that hangs on its first call and answers at once afterwards."""
    calls: list[int] = []

    def handler(arguments: dict[str, Any], context: ToolContext) -> str:
        calls.append(1)
        if len(calls) == 1:
            release.wait(10)
        return "answered"

    return handler, calls


@pytest.mark.parametrize("side_effects", ["read_only", "idempotent"])
def test_timeouts_are_retried_for_repeatable_tools(release: threading.Event, side_effects: str) -> None:
    recorder = Recorder()
    handler, calls = hanging_once(release)

    result = run(handler, recorder, max_attempts=2, timeout_s=0.2, side_effects=side_effects)

    assert result.success and result.result == "answered"
    assert result.attempts == 2 and len(calls) == 2
    assert recorder.retries == [(1, "Error: Tool 'flaky' timed out after 0.2 seconds.")]


def test_timeouts_are_not_retried_for_not_idempotent_tools(release: threading.Event) -> None:
    recorder = Recorder()
    handler, calls = hanging_once(release)

    result = run(handler, recorder, max_attempts=3, timeout_s=0.2, side_effects="not_idempotent")

    assert result.status == "timeout"
    assert result.attempts == 1 and len(calls) == 1
    assert recorder.retries == []


def test_each_attempt_gets_the_original_arguments() -> None:
    seen: list[dict[str, Any]] = []

    def handler(arguments: dict[str, Any], context: ToolContext) -> str:
        seen.append(dict(arguments))
        arguments["mutated"] = True
        if len(seen) < 2:
            raise TransientToolError("again")
        return "ok"

    tool = make_tool(name="flaky", handler=handler, max_attempts=2)
    execute_tool(registry_of(tool), "flaky", {"a": 1}, sleep=lambda seconds: None)

    assert seen == [{"a": 1}, {"a": 1}]


def test_execution_time_includes_retries_and_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor, "backoff_delay", lambda policy, attempt: 0.05)
    handler, _ = failing(2, TransientToolError("flaky"))
    tool = make_tool(name="flaky", handler=handler, max_attempts=3)

    result = execute_tool(registry_of(tool), "flaky", {})

    assert result.success and result.attempts == 3
    assert result.execution_time_ms >= 100


def test_no_further_attempt_once_the_run_is_cancelled() -> None:
    from tests.tools.factories import make_tool, registry_of
    from tools.base import ToolContext
    from tools.errors import TransientToolError
    from tools.executor import execute_tool

    calls = []

    def flaky(args, ctx):
        calls.append(1)
        raise TransientToolError("upstream busy")

    cancelled = {"now": False}
    tool = make_tool(name="flaky", handler=flaky, max_attempts=5)
    result = execute_tool(
        registry_of(tool), "flaky", {},
        context=ToolContext(cancel_check=lambda: cancelled["now"]),
        sleep=lambda delay: cancelled.update(now=True),  # cancelled while waiting for the retry
    )
    assert len(calls) == 1 and result.status == "error"
