"""Human approval of tool calls in the engine: a call that needs approval is
recorded and not enqueued, the round's other calls run, the fan-in waits for
the decision; approve enqueues it, deny and expiry give the model an error
result; decisions are idempotent and a different one is refused; the sweeper
leaves waiting runs alone; /v1 runs deny or refuse. Steps are delivered by
calling the Celery tasks in this process; what they enqueue lands on a
broker no worker listens on, where it is counted."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from chatforge.catalog.models import Assistant, ToolDefinition
from chatforge.conversations.models import Conversation, Message, Run, ToolInvocation
from chatforge.errors import ApprovalRequired, DecisionConflict, NotFound
from orchestration import tasks
from orchestration.event_log import get_event_log
from orchestration.services.approvals import decide
from orchestration.services.runs import RunOptions, run_request_cancel, run_start
from orchestration.services.snapshots import snapshot_event
from orchestration.services.sweeper import sweep_stalled_runs
from tests.conftest import QUEUES
from tests.fakes.openai_server import Reply

from .test_redelivery import enqueued

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def engine(settings, fake_llm, idle_broker, make_user):
    settings.OPENAI_BASE_URL = fake_llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    Assistant.objects.create(name="careful", tools=["echo", "calculator"], approval_required_tools=["echo"])
    user, _ = make_user()
    return user, idle_broker, fake_llm


def start(user, model: str, **options) -> Run:
    return run_start(user=user, conversation=Conversation.objects.create(user=user), content="go",
                     options=RunOptions(model=model, **options))


def events_of(run: Run, kind: str) -> list[dict]:
    return [e["data"] for e in get_event_log().read(str(run.id), after=0) if e["type"] == kind]


def waiting_call(engine_fixture, script: str, calls: list) -> tuple[Run, ToolInvocation]:
    """A run of the 'careful' assistant whose first turn asked for ``calls``."""
    user, broker, fake_llm = engine_fixture
    fake_llm.add_script(script, [Reply(text="Let me check.", tool_calls=calls), Reply(text="Done.")])
    run = start(user, script, assistant="careful")
    broker.delete(*QUEUES)
    tasks.llm_turn(str(run.id), 0)
    return run, ToolInvocation.objects.get(run=run, name="echo")


def test_a_call_that_needs_approval_waits_unqueued_and_runs_once_approved(engine):
    user, broker, fake_llm = engine
    run, inv = waiting_call(engine, "approve-me", [("echo", {"text": "hi"})])

    assert inv.status == "awaiting_approval" and inv.approval_expires_at is not None
    assert enqueued(broker) == []  # nothing waits on a queue or a worker
    assert Run.objects.get(pk=run.pk).pending_tool_calls == 1
    [asked] = events_of(run, "approval.required")
    assert asked["tool_call_id"] == inv.tool_call_id and asked["name"] == "echo"
    assert asked["arguments"] == '{"text": "hi"}' and asked["expires_at"].endswith("Z")

    decided = decide(run_id=str(run.id), tool_call_id=inv.tool_call_id, user=user, decision="approve")

    assert decided.status == "pending"
    assert enqueued(broker) == [("chatforge.tool_call", [str(run.id), inv.tool_call_id])]
    assert events_of(run, "approval.decided") == [
        {"tool_call_id": inv.tool_call_id, "decision": "approve", "reason": "", "by": user.get_username(),
         "expired": False}]
    broker.delete(*QUEUES)
    tasks.tool_call(str(run.id), inv.tool_call_id)
    assert enqueued(broker) == [("chatforge.llm_turn", [str(run.id), 1])]
    tasks.llm_turn(str(run.id), 1)
    run.refresh_from_db()
    assert run.status == "completed"
    inv.refresh_from_db()
    assert (inv.status, inv.approval_decision, inv.approval_decided_by_id) == ("success", "approve", user.id)


def test_the_rounds_other_calls_run_meanwhile_and_a_denial_reaches_the_model(engine):
    user, broker, fake_llm = engine
    run, inv = waiting_call(engine, "deny-me", [("echo", {"text": "hi"}), ("calculator", {"expression": "2+2"})])
    other = ToolInvocation.objects.get(run=run, name="calculator")
    assert enqueued(broker) == [("chatforge.tool_call", [str(run.id), other.tool_call_id])]

    broker.delete(*QUEUES)
    tasks.tool_call(str(run.id), other.tool_call_id)
    assert enqueued(broker) == []  # the fan-in waits for the decision
    assert Run.objects.get(pk=run.pk).pending_tool_calls == 1

    decide(run_id=str(run.id), tool_call_id=inv.tool_call_id, user=user, decision="deny",
           reason="Not that text.")

    inv.refresh_from_db()
    assert inv.status == "error"
    assert inv.output.startswith("Error: the user declined to run 'echo', so it was not run. Their reason: Not that text.")
    assert enqueued(broker) == [("chatforge.llm_turn", [str(run.id), 1])]
    [output] = [o for o in events_of(run, "tool_output") if o["tool_call_id"] == inv.tool_call_id]
    assert output["status"] == "error" and "declined" in output["output"]
    tasks.llm_turn(str(run.id), 1)
    second = fake_llm.requests_for("deny-me")[-1]
    tool_texts = [m["content"] for m in second["messages"] if m["role"] == "tool"]
    assert any("declined to run 'echo'" in text and "Not that text." in text for text in tool_texts)
    assert any(text == "4" or "4" in text for text in tool_texts)
    message = Message.objects.get(run=run, role="assistant")
    assert {r["name"]: r["status"] for r in message.tool_rounds[0]["results"]} == {"echo": "error",
                                                                                 "calculator": "success"}


def test_the_same_decision_again_is_a_no_op_and_a_different_one_is_refused(engine, make_user):
    user, broker, _ = engine
    run, inv = waiting_call(engine, "twice", [("echo", {"text": "hi"})])
    decide(run_id=str(run.id), tool_call_id=inv.tool_call_id, user=user, decision="approve")
    broker.delete(*QUEUES)

    again = decide(run_id=str(run.id), tool_call_id=inv.tool_call_id, user=user, decision="approve")
    assert again.approval_decision == "approve" and enqueued(broker) == []  # not enqueued twice
    with pytest.raises(DecisionConflict, match="already approved by"):
        decide(run_id=str(run.id), tool_call_id=inv.tool_call_id, user=user, decision="deny")
    stranger, _ = make_user()
    with pytest.raises(NotFound):
        decide(run_id=str(run.id), tool_call_id=inv.tool_call_id, user=stranger, decision="deny")
    with pytest.raises(NotFound):
        decide(run_id=str(run.id), tool_call_id="call_nope", user=user, decision="deny")
    assert len(events_of(run, "approval.decided")) == 1


def test_a_call_that_needs_no_approval_cannot_be_decided(engine):
    user, broker, _ = engine
    run, _ = waiting_call(engine, "not-asked", [("echo", {"text": "hi"}), ("calculator", {"expression": "1"})])
    other = ToolInvocation.objects.get(run=run, name="calculator")
    with pytest.raises(DecisionConflict, match="does not require approval"):
        decide(run_id=str(run.id), tool_call_id=other.tool_call_id, user=user, decision="approve")


def test_an_unanswered_request_is_denied_by_the_sweeper_and_cannot_be_approved_after(engine, settings):
    user, broker, fake_llm = engine
    run, inv = waiting_call(engine, "lapse", [("echo", {"text": "hi"})])
    # Not yet due: the sweeper leaves it (and the run, whose heartbeat is old) alone.
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(days=1))
    assert sweep_stalled_runs() == 0
    assert enqueued(broker) == []

    ToolInvocation.objects.filter(pk=inv.pk).update(approval_expires_at=timezone.now() - timedelta(seconds=1))
    sweep_stalled_runs()

    inv.refresh_from_db()
    assert inv.status == "error" and inv.approval_decision == "deny" and inv.approval_decided_by is None
    assert "needs the user's approval for each call, and none was given within" in inv.output
    [decided] = events_of(run, "approval.decided")
    assert decided["expired"] is True and decided["by"] is None and decided["decision"] == "deny"
    assert enqueued(broker) == [("chatforge.llm_turn", [str(run.id), 1])]
    with pytest.raises(DecisionConflict, match="no decision in time"):
        decide(run_id=str(run.id), tool_call_id=inv.tool_call_id, user=user, decision="approve")


def test_cancelling_a_waiting_run_ends_it_and_closes_the_request(engine):
    user, broker, _ = engine
    run, inv = waiting_call(engine, "cancel-wait", [("echo", {"text": "hi"})])

    run_request_cancel(run=run)

    run.refresh_from_db()
    inv.refresh_from_db()
    assert run.status == "cancelled"
    assert inv.status == "cancelled" and "waiting for the user's approval when the run ended" in inv.output
    with pytest.raises(DecisionConflict, match="run has ended"):
        decide(run_id=str(run.id), tool_call_id=inv.tool_call_id, user=user, decision="approve")


def test_a_snapshot_of_a_waiting_run_lists_the_request(engine):
    run, inv = waiting_call(engine, "snap", [("echo", {"text": "hi"})])
    snapshot = snapshot_event(Run.objects.get(pk=run.pk), seq=1, reason="log_missing")
    assert [p["tool_call_id"] for p in snapshot["data"]["pending_approvals"]] == [inv.tool_call_id]
    assert snapshot["data"]["rounds"][0]["results"][0]["status"] == "awaiting_approval"


def test_a_snapshot_after_a_denial_says_who_denied_the_call(engine):
    """A page rebuilt from a snapshot alone shows the call as denied, not
    failed: the snapshot carries the decision its result does not."""
    user, _, _ = engine
    run, inv = waiting_call(engine, "snap-deny", [("echo", {"text": "hi"})])
    decide(run_id=str(run.id), tool_call_id=inv.tool_call_id, user=user, decision="deny", reason="not now")

    snapshot = snapshot_event(Run.objects.get(pk=run.pk), seq=9, reason="events_missing")
    assert snapshot["data"]["approvals"] == {inv.tool_call_id: {
        "decision": "deny", "reason": "not now", "by": user.username, "expired": False}}
    assert snapshot["data"]["rounds"][0]["results"][0]["status"] == "error"
    assert snapshot["data"]["pending_approvals"] == []


def test_a_data_tools_policy_asks_and_an_assistant_can_waive_it(engine):
    user, broker, fake_llm = engine
    ToolDefinition.objects.create(
        name="wipe_notes", description="Delete the notes.", kind="http", method="POST",
        url="http://127.0.0.1:9/wipe", parameters={"type": "object", "properties": {}},
        requires_approval=True)
    from chatforge.catalog.catalog import get_catalog
    get_catalog(fresh=True)
    Assistant.objects.create(name="trusting", tools=["wipe_notes"], approval_waived_tools=["wipe_notes"])

    asked = start(user, "any", tools=["wipe_notes"])
    waived = start(user, "any", assistant="trusting")

    assert asked.options["approval_tools"] == ["wipe_notes"]
    assert "approval_tools" not in waived.options


def test_v1_runs_deny_such_calls_with_a_clear_result_by_default(engine):
    user, broker, fake_llm = engine
    fake_llm.add_script("v1-deny", [Reply(tool_calls=[("echo", {"text": "hi"})]), Reply(text="Could not.")])
    run = start(user, "v1-deny", assistant="careful", can_ask_approval=False)
    broker.delete(*QUEUES)
    tasks.llm_turn(str(run.id), 0)
    inv = ToolInvocation.objects.get(run=run)
    assert inv.status == "pending"  # enqueued: its step answers at once
    tasks.tool_call(str(run.id), inv.tool_call_id)
    inv.refresh_from_db()
    assert inv.status == "error"
    assert inv.output.startswith("Error: 'echo' needs a person's approval for each call, and this request")


def test_v1_can_be_set_to_refuse_requests_naming_such_tools(engine, settings):
    user, _, _ = engine
    settings.CHATFORGE_V1_APPROVAL = "reject"
    with pytest.raises(ApprovalRequired, match="echo") as refused:
        start(user, "any", tools=["echo", "calculator"], assistant="careful", can_ask_approval=False)
    assert refused.value.details["approval_required"] == ["echo"]
    # A request naming no tools gets the assistant's tools without the ones that ask.
    run = start(user, "any", assistant="careful", can_ask_approval=False)
    assert run.options["tools"] == ["calculator"] and "approval_tools" not in run.options
