"""Tools on the I/O pool (decision 0025), through real workers: a call runs
on the worker its tool's policy names, calls of one round on the threads
worker run side by side, a data tool's row moves its calls when edited, and
handlers that hang there are cut off at their timeout without stopping the
worker."""

from __future__ import annotations

import pytest

from chatforge.catalog.models import ToolDefinition, ToolPool
from chatforge.conversations.models import ToolInvocation
from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient, follow_run

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _run(stack, fake_llm, make_user, model: str, replies: list[Reply]) -> tuple[str, list[dict]]:
    fake_llm.add_script(model, replies)
    _, token = make_user()
    api = ApiClient(stack.http_url, token)
    accepted = api.post_message(api.new_conversation(), "go", model=model)
    events = follow_run(stack.ws_url, accepted["run_id"], token)
    assert events[-1]["type"] == "run.completed", stack.logs()
    return accepted["run_id"], events


def _workers(run_id: str) -> dict[str, set[str]]:
    """Tool name -> the worker node names (without the host) that ran its calls."""
    by_tool: dict[str, set[str]] = {}
    for name, worker in ToolInvocation.objects.filter(run_id=run_id).values_list("name", "worker"):
        by_tool.setdefault(name, set()).add(worker.partition("@")[0])
    return by_tool


def test_each_call_runs_on_the_pool_its_tool_asks_for(stack, fake_llm, make_user):
    run_id, _ = _run(stack, fake_llm, make_user, "io-pools", [
        # Arguments differ: the same call three times is refused as circular.
        Reply(text="Both.", tool_calls=[("wait_io", {"ms": 300}), ("wait_io", {"ms": 301}),
                                        ("wait_io", {"ms": 302}), ("slow_sleep", {"ms": 10})]),
        Reply(text="Done."),
    ])

    assert _workers(run_id) == {"wait_io": {"tools-io"}, "slow_sleep": {"tools"}}
    calls = ToolInvocation.objects.filter(run_id=run_id, name="wait_io")
    assert {c.status for c in calls} == {"success"}
    # The round's three I/O calls ran side by side on the one threads worker
    # (on a process each of a prefork pool they would too, but here it is
    # one process): each started before any of them finished.
    assert max(c.started_at for c in calls) < min(c.finished_at for c in calls)


def test_a_data_tools_calls_move_to_the_pool_its_row_names(stack, fake_llm, make_user):
    tool = ToolDefinition.objects.create(
        name="io_mock", description="A fixed answer.", kind="mock",
        parameters={"type": "object", "properties": {}}, mock_response={"ok": True},
    )
    first, _ = _run(stack, fake_llm, make_user, "io-row-1", [Reply(tool_calls=[("io_mock", {})]), Reply(text="a")])
    tool.pool = ToolPool.IO
    tool.save()
    second, _ = _run(stack, fake_llm, make_user, "io-row-2", [Reply(tool_calls=[("io_mock", {})]), Reply(text="b")])

    assert _workers(first) == {"io_mock": {"tools"}}
    assert _workers(second) == {"io_mock": {"tools-io"}}


def test_hung_handlers_on_the_io_pool_are_cut_off_and_the_worker_goes_on(stack, fake_llm, make_user):
    run_id, events = _run(stack, fake_llm, make_user, "io-hang", [
        Reply(tool_calls=[("hang_sync_io", {}), ("hang_async_io", {})]),
        Reply(tool_calls=[("wait_io", {"ms": 10})]),
        Reply(text="Both timed out; the next call worked."),
    ])

    outputs = {e["data"]["name"]: e["data"] for e in events if e["type"] == "tool_output"}
    for name in ("hang_sync_io", "hang_async_io"):
        assert outputs[name]["status"] == "timeout"
        assert outputs[name]["output"] == f"Error: Tool '{name}' timed out after 1 seconds."
    assert outputs["wait_io"]["status"] == "success"
    assert _workers(run_id) == {"hang_sync_io": {"tools-io"}, "hang_async_io": {"tools-io"}, "wait_io": {"tools-io"}}
