"""Which queue a tool call goes to (decision 0025): the tool's policy names
its pool, the dispatcher picks the task of that pool's queue, and the step
runs the same whichever task delivered it."""

from __future__ import annotations

import pytest

from chatforge.catalog.models import ToolDefinition, ToolPool
from chatforge.conversations.models import Conversation, ToolInvocation
from orchestration import tasks
from orchestration.queueing.dispatch import TOOL_CALL, TOOL_CALL_IO, tool_call_task
from orchestration.services.runs import RunOptions, run_start
from tests.engine.test_redelivery import enqueued
from tests.fakes.openai_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_task_follows_the_tools_policy():
    assert tool_call_task("wait_io") == TOOL_CALL_IO  # code tool declared pool="io"
    assert tool_call_task("slow_sleep") == TOOL_CALL  # the default: prefork
    assert tool_call_task("no_such_tool") == TOOL_CALL  # the executor answers "unknown tool" there


def test_without_an_io_worker_every_call_goes_to_prefork(settings):
    settings.CHATFORGE_TOOLS_IO_POOL = False
    assert tool_call_task("wait_io") == TOOL_CALL


def test_a_data_tools_row_names_its_pool_and_an_edit_moves_it():
    row = ToolDefinition.objects.create(name="pooled_mock", description="d", kind="mock",
                                        parameters={"type": "object"}, mock_response={"ok": True})
    assert tool_call_task("pooled_mock") == TOOL_CALL
    row.pool = ToolPool.IO
    row.save()  # bumps the catalog's version: this process rebuilds its catalog
    assert tool_call_task("pooled_mock") == TOOL_CALL_IO


def test_a_round_is_sent_to_each_calls_queue_and_runs_from_either_task(settings, fake_llm, idle_broker, make_user):
    settings.OPENAI_BASE_URL = fake_llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    fake_llm.add_script("pools", [
        Reply(tool_calls=[("wait_io", {"ms": 0}), ("echo", {"text": "a"})]),
        Reply(text="Done."),
    ])
    user, _ = make_user()
    run = run_start(user=user, conversation=Conversation.objects.create(user=user), content="go",
                    options=RunOptions(model="pools"))
    run_id = str(run.id)
    tasks.llm_turn(run_id, 0)

    calls = dict(ToolInvocation.objects.filter(run=run).values_list("name", "tool_call_id"))
    assert [m for m in enqueued(idle_broker) if m[0] != "chatforge.llm_turn"] == sorted([
        (TOOL_CALL_IO, [run_id, calls["wait_io"]]), (TOOL_CALL, [run_id, calls["echo"]]),
    ])
    assert idle_broker.llen("tools_io") == 1 and idle_broker.llen("tools") == 1

    tasks.tool_call_io(run_id, calls["wait_io"])
    tasks.tool_call(run_id, calls["echo"])
    statuses = dict(ToolInvocation.objects.filter(run=run).values_list("name", "status"))
    assert statuses == {"wait_io": "success", "echo": "success"}
    assert ("chatforge.llm_turn", [run_id, 1]) in enqueued(idle_broker)
