"""The one-statement records (Postgres): a turn that asks for tools
(``turn_record.py``) and a tool call with its count-off
(``call_record.py``) write only when their row is still in the state the
delivery claimed it in, so a second delivery's record changes nothing; an
answer recorded in finalize's first round trip likewise."""

from __future__ import annotations

import pytest
from django.utils import timezone

from chatforge.conversations.models import Conversation, LlmTurn, Message, Run, ToolInvocation
from chatforge.db.sql_rows import update_statement
from orchestration.services.call_record import record_call_and_count_off
from orchestration.services.claims import claim_turn
from orchestration.services.finalize import Outcome, run_finalize
from orchestration.services.runs import RunOptions, run_start
from orchestration.services.turn_record import record_turn_with_calls

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def claimed_turn(settings, make_user, idle_broker) -> LlmTurn:
    settings.OPENAI_API_KEY = "test-key"
    user, _ = make_user()
    run = run_start(user=user, conversation=Conversation.objects.create(user=user), content="go",
                    options=RunOptions(model="plain"))
    return claim_turn(str(run.id), 0)


def _calls(turn: LlmTurn, *names: str) -> list[ToolInvocation]:
    return [ToolInvocation(run=turn.run, tool_call_id=f"call_{name}", iteration=0, position=position, name=name,
                           arguments="{}", status="pending") for position, name in enumerate(names)]


def _record_turn(turn: LlmTurn, calls: list[ToolInvocation]) -> bool:
    return record_turn_with_calls(turn, {"status": "completed", "text": "Checking.", "finished_at": timezone.now()},
                                  calls, pending=len(calls), now=timezone.now())


def test_a_turn_is_recorded_with_its_calls_and_the_rounds_count(claimed_turn):
    calls = _calls(claimed_turn, "echo", "clock")

    assert _record_turn(claimed_turn, calls) is True

    stored = LlmTurn.objects.get(pk=claimed_turn.pk)
    assert (stored.status, stored.text) == ("completed", "Checking.")
    rows = list(ToolInvocation.objects.filter(run=claimed_turn.run).order_by("position"))
    assert [(row.pk, row.name, row.status) for row in rows] == [(call.pk, call.name, "pending") for call in calls]
    assert all(call.pk is not None and not call._state.adding for call in calls)
    assert Run.objects.get(pk=claimed_turn.run_id).pending_tool_calls == 2


def test_a_turn_recorded_by_another_delivery_is_left_as_it_is(claimed_turn):
    assert _record_turn(claimed_turn, _calls(claimed_turn, "echo")) is True

    assert _record_turn(claimed_turn, _calls(claimed_turn, "clock", "echo2")) is False

    assert list(ToolInvocation.objects.filter(run=claimed_turn.run).values_list("name", flat=True)) == ["echo"]
    assert Run.objects.get(pk=claimed_turn.run_id).pending_tool_calls == 1


def test_a_call_recorded_by_another_delivery_is_not_counted_again(claimed_turn):
    calls = _calls(claimed_turn, "echo", "clock")
    _record_turn(claimed_turn, calls)
    ToolInvocation.objects.filter(run=claimed_turn.run).update(status="running")
    now = timezone.now()

    first = record_call_and_count_off(calls[0], {"status": "success", "output": "a"}, from_status="running",
                                      now=now, offer_tools_below=10)
    again = record_call_and_count_off(calls[0], {"status": "error", "output": "b"}, from_status="running",
                                      now=now, offer_tools_below=10)

    assert first.recorded and (first.counted.pending, first.counted.iteration) == (1, 0)
    assert not first.counted.next_turn_created
    assert (again.recorded, again.counted) == (False, None)
    assert ToolInvocation.objects.get(pk=calls[0].pk).output == "a"
    run = Run.objects.get(pk=claimed_turn.run_id)
    assert (run.pending_tool_calls, run.iteration) == (1, 0)

    last = record_call_and_count_off(calls[1], {"status": "success", "output": "c"}, from_status="running",
                                     now=now, offer_tools_below=10)
    assert (last.counted.pending, last.counted.iteration, last.counted.next_turn_created) == (0, 1, True)
    assert LlmTurn.objects.get(run=claimed_turn.run, iteration=1).offered_tools is True


def test_an_answer_is_recorded_in_finalizes_transaction_once(claimed_turn):
    def answer(text: str) -> bool:
        recording = update_statement(LlmTurn, {"status": "completed", "text": text, "finished_at": timezone.now()},
                                     pk=claimed_turn.pk, status="running")
        return run_finalize(run_id=str(claimed_turn.run_id), outcome=Outcome.COMPLETED, recording=recording)

    assert answer("Done.") is True
    assert answer("Again.") is False  # the turn was recorded: this delivery changes nothing

    run = Run.objects.get(pk=claimed_turn.run_id)
    assert run.status == "completed"
    assert list(Message.objects.filter(run=run, role="assistant").values_list("content", flat=True)) == ["Done."]
    assert LlmTurn.objects.get(pk=claimed_turn.pk).text == "Done."
