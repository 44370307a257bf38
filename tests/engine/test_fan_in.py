"""The fan-in under concurrency: the calls of one round recorded at the same
instant by different deliveries (threads with their own connections, as
workers on different hosts) start the next turn exactly once."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from chatforge.conversations.models import Conversation, LlmTurn, Run, ToolInvocation
from orchestration import tasks
from orchestration.services.runs import RunOptions, run_start
from orchestration.services.tool_steps import record_result
from tests.fakes.openai_server import Reply
from tools.executor import ToolResult

from .test_redelivery import enqueued

pytestmark = pytest.mark.django_db(transaction=True)

CALLS = 8


@pytest.fixture
def wide_round(settings, fake_llm, idle_broker, make_user):
    settings.OPENAI_BASE_URL = fake_llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.CHATFORGE_TOOL_REPEAT_LIMIT = CALLS + 1
    fake_llm.add_script("fan-in", [Reply(text="All at once.",
                                         tool_calls=[("echo", {"text": str(i)}) for i in range(CALLS)]),
                                   Reply(text="Done.")])
    user, _ = make_user()
    run = run_start(user=user, conversation=Conversation.objects.create(user=user), content="go",
                    options=RunOptions(model="fan-in"))
    tasks.llm_turn(str(run.id), 0)
    return run, idle_broker


def _deliver_at_once(run_id: str, call_ids: list[str]) -> list[BaseException]:
    start = threading.Barrier(len(call_ids))
    failures: list[BaseException] = []

    def deliver(call_id: str) -> None:
        try:
            start.wait()
            tasks.tool_call(run_id, call_id)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver, args=(call_id,)) for call_id in call_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return failures


def test_calls_finishing_together_start_the_next_turn_once(wide_round):
    run, broker = wide_round
    run_id = str(run.id)
    call_ids = list(ToolInvocation.objects.filter(run=run).values_list("tool_call_id", flat=True))
    assert len(call_ids) == CALLS
    assert Run.objects.get(pk=run.pk).pending_tool_calls == CALLS

    assert _deliver_at_once(run_id, call_ids) == []

    run.refresh_from_db()
    assert (run.iteration, run.pending_tool_calls) == (1, 0)
    assert set(ToolInvocation.objects.filter(run=run).values_list("status", flat=True)) == {"success"}
    assert LlmTurn.objects.filter(run=run, iteration=1).count() == 1
    next_turns = [args for name, args in enqueued(broker) if name == "chatforge.llm_turn" and args[1] == 1]
    assert next_turns == [[run_id, 1]]


def test_every_call_delivered_twice_at_once_is_counted_once(wide_round):
    run, broker = wide_round
    run_id = str(run.id)
    call_ids = list(ToolInvocation.objects.filter(run=run).values_list("tool_call_id", flat=True))

    assert _deliver_at_once(run_id, call_ids + call_ids) == []

    run.refresh_from_db()
    assert (run.iteration, run.pending_tool_calls) == (1, 0)
    next_turns = [args for name, args in enqueued(broker) if name == "chatforge.llm_turn" and args[1] == 1]
    assert next_turns == [[run_id, 1]]
    tasks.llm_turn(run_id, 1)
    run.refresh_from_db()
    assert run.status == "completed"


def test_a_round_ending_after_stop_was_asked_cancels_the_run_without_a_next_turn(wide_round):
    run, broker = wide_round
    call_ids = list(ToolInvocation.objects.filter(run=run).values_list("tool_call_id", flat=True))
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)

    for call_id in call_ids:
        # The calls were claimed before Stop was asked (a later delivery stops at its claim).
        ToolInvocation.objects.filter(run=run, tool_call_id=call_id).update(status="running")
        record_result(ToolInvocation.objects.select_related("run").get(run=run, tool_call_id=call_id),
                      ToolResult(tool_name="echo", status="success", result="done"))

    run.refresh_from_db()
    assert (run.status, run.iteration, run.pending_tool_calls) == ("cancelled", 0, 0)
    assert not LlmTurn.objects.filter(run=run, iteration=1).exists()
    assert [args for name, args in enqueued(broker) if name == "chatforge.llm_turn" and args[1] == 1] == []


def test_the_turn_after_the_last_allowed_round_is_offered_no_tools(wide_round):
    run, broker = wide_round
    Run.objects.filter(pk=run.pk).update(options={**run.options, "max_iterations": 1})

    assert _deliver_at_once(str(run.id), list(ToolInvocation.objects.filter(run=run)
                                              .values_list("tool_call_id", flat=True))) == []

    assert LlmTurn.objects.get(run=run, iteration=1).offered_tools is False
