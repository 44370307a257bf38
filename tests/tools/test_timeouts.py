"""Per-tool timeouts, enforced by the executor for sync and async handlers alike."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tools.base import ToolContext
from tools.executor import ToolResult, execute_tool
from tests.tools.factories import make_tool, registry_of

TIMEOUT_S = 0.2
TIMEOUT_TEXT = "Error: Tool 'slow' timed out after 0.2 seconds."


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Lets blocked sync handlers finish once the test is over, so no thread lingers."""
    event = threading.Event()
    yield event
    event.set()


def run_slow(handler: Any, **policy: Any) -> ToolResult:
    tool = make_tool(name="slow", handler=handler, timeout_s=TIMEOUT_S, **policy)
    return execute_tool(registry_of(tool), "slow", {})


def assert_timed_out(result: ToolResult) -> None:
    assert result.status == "timeout"
    assert not result.success
    assert result.error == TIMEOUT_TEXT
    assert result.output_text() == TIMEOUT_TEXT
    assert not result.retryable_by_model
    assert result.execution_time_ms >= TIMEOUT_S * 1000


def test_sync_handler_times_out(release: threading.Event) -> None:
    def handler(arguments: dict[str, Any], context: ToolContext) -> str:
        release.wait(10)
        return "too late"

    assert_timed_out(run_slow(handler))


def test_async_handler_times_out_and_is_cancelled() -> None:
    cancelled = threading.Event()

    async def handler(arguments: dict[str, Any], context: ToolContext) -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "too late"

    assert_timed_out(run_slow(handler))
    assert cancelled.wait(2), "the async handler should be cancelled at the deadline"


def test_async_handler_blocking_its_loop_still_times_out(release: threading.Event) -> None:
    async def handler(arguments: dict[str, Any], context: ToolContext) -> str:
        release.wait(10)  # synchronous wait: asyncio cannot interrupt it
        return "too late"

    assert_timed_out(run_slow(handler))


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_timeout_error_raised_by_the_handler_is_an_ordinary_error(kind: str) -> None:
    def sync_handler(arguments: dict[str, Any], context: ToolContext) -> str:
        raise TimeoutError("upstream read timed out")

    async def async_handler(arguments: dict[str, Any], context: ToolContext) -> str:
        raise TimeoutError("upstream read timed out")

    result = run_slow(sync_handler if kind == "sync" else async_handler)

    assert result.status == "error"
    assert result.error == "Error executing tool 'slow': TimeoutError: upstream read timed out"


def test_fast_handlers_are_not_affected() -> None:
    async def handler(arguments: dict[str, Any], context: ToolContext) -> str:
        await asyncio.sleep(0)
        return "quick"

    tool = make_tool(name="quick", handler=handler, timeout_s=5)
    assert execute_tool(registry_of(tool), "quick", {}).result == "quick"


def test_timeout_works_from_inside_a_running_event_loop() -> None:
    async def handler(arguments: dict[str, Any], context: ToolContext) -> str:
        await asyncio.sleep(10)
        return "too late"

    async def caller() -> ToolResult:
        return run_slow(handler)

    assert_timed_out(asyncio.run(caller()))


def test_timeout_works_from_a_worker_thread(release: threading.Event) -> None:
    def handler(arguments: dict[str, Any], context: ToolContext) -> str:
        release.wait(10)
        return "too late"

    results: list[ToolResult] = []
    worker = threading.Thread(target=lambda: results.append(run_slow(handler)))
    worker.start()
    worker.join(5)

    assert len(results) == 1
    assert_timed_out(results[0])
