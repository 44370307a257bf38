"""Delivering any step twice leaves the same rows and enqueues the next step
once. Steps are delivered by calling the Celery tasks in this process; what
they enqueue lands on a broker no worker listens on, where it is counted."""

from __future__ import annotations

import base64
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from chatforge.conversations.models import Conversation, LlmTurn, Message, Run, ToolInvocation
from orchestration import tasks
from orchestration.event_log import get_event_log
from orchestration.services.runs import RunOptions, run_start
from orchestration.services.sweeper import sweep_stalled_runs
from tests.conftest import QUEUES
from tests.fakes.openai_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def engine(settings, fake_llm, idle_broker, make_user):
    settings.OPENAI_BASE_URL = fake_llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    fake_llm.add_script(
        "redelivery",
        [
            Reply(text="Two at once.", tool_calls=[("calculator", {"expression": "1+1"}), ("echo", {"text": "a"})]),
            Reply(tool_calls=[("echo", {"text": "b"})]),
            Reply(text="Done: 2, a, b."),
        ],
    )
    user, _ = make_user()
    return user, idle_broker


def new_run(user, model: str) -> Run:
    return run_start(user=user, conversation=Conversation.objects.create(user=user), content="go",
                     options=RunOptions(model=model))


def enqueued(broker) -> list[tuple[str, list]]:
    """(task name, args) of every message waiting in the idle broker."""
    found = []
    for queue in QUEUES:
        for raw in broker.lrange(queue, 0, -1):
            message = json.loads(raw)
            args = json.loads(base64.b64decode(message["body"]))[0]
            found.append((message["headers"]["task"], args))
    return sorted(found)


def snapshot(run: Run) -> dict:
    return {
        "run": Run.objects.filter(pk=run.pk).values().get(),
        "turns": list(LlmTurn.objects.filter(run=run).order_by("iteration").values()),
        "invocations": list(ToolInvocation.objects.filter(run=run).order_by("iteration", "position").values()),
        "messages": list(Message.objects.filter(conversation=run.conversation).order_by("created_at").values()),
    }


def deliver_twice(task, *args) -> tuple[dict, dict]:
    run = Run.objects.get(pk=args[0])
    task(*args)
    first = snapshot(run)
    task(*args)
    return first, snapshot(run)


def test_every_step_delivered_twice(engine):
    user, broker = engine
    conversation = Conversation.objects.create(user=user)
    run = run_start(user=user, conversation=conversation, content="go", options=RunOptions(model="redelivery"))
    run_id = str(run.id)
    assert enqueued(broker) == [("chatforge.llm_turn", [run_id, 0])]

    first, second = deliver_twice(tasks.llm_turn, run_id, 0)
    assert first == second
    calls = [inv["tool_call_id"] for inv in second["invocations"]]
    assert len(calls) == 2
    assert enqueued(broker) == sorted(
        [("chatforge.llm_turn", [run_id, 0])] + [("chatforge.tool_call", [run_id, c]) for c in calls]
    )

    first, second = deliver_twice(tasks.tool_call, run_id, calls[0])
    assert first == second
    assert [m for m in enqueued(broker) if m[0] == "chatforge.llm_turn"] == [("chatforge.llm_turn", [run_id, 0])]
    first, second = deliver_twice(tasks.tool_call, run_id, calls[1])
    assert first == second
    assert [m for m in enqueued(broker) if m[0] == "chatforge.llm_turn"] == sorted(
        [("chatforge.llm_turn", [run_id, 0]), ("chatforge.llm_turn", [run_id, 1])]
    )
    # The first call delivered again after the fan-in changes nothing either.
    before = snapshot(run)
    tasks.tool_call(run_id, calls[0])
    assert snapshot(run) == before

    first, second = deliver_twice(tasks.llm_turn, run_id, 1)
    assert first == second
    echo_call = second["invocations"][-1]["tool_call_id"]
    first, second = deliver_twice(tasks.tool_call, run_id, echo_call)
    assert first == second
    first, second = deliver_twice(tasks.llm_turn, run_id, 2)
    assert first == second
    tasks.finalize_run(run_id, "completed")
    assert snapshot(run) == second

    llm_turns = sorted(args for name, args in enqueued(broker) if name == "chatforge.llm_turn")
    assert llm_turns == [[run_id, 0], [run_id, 1], [run_id, 2]]
    assert len([1 for name, _ in enqueued(broker) if name == "chatforge.tool_call"]) == 3
    run.refresh_from_db()
    assert run.status == "completed"
    assistant = Message.objects.get(run=run, role="assistant")
    assert assistant.content == "Done: 2, a, b."
    assert len(assistant.tool_rounds) == 2

    events = get_event_log().read(run_id, after=0)
    types = [e["type"] for e in events]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert types.count("run.started") == 1
    assert types.count("tool_call") == 3 and types.count("tool_output") == 3
    assert types.count("run.completed") == 1 and types[-1] == "run.completed"


def test_a_step_whose_worker_died_mid_call_runs_again(engine):
    user, broker = engine
    run = new_run(user, "redelivery")
    tasks.llm_turn(str(run.id), 0)
    inv = ToolInvocation.objects.filter(run=run).first()
    # The first delivery claimed the call and then its process was killed.
    ToolInvocation.objects.filter(pk=inv.pk).update(status="running", deliveries=1)

    tasks.tool_call(str(run.id), inv.tool_call_id)

    inv.refresh_from_db()
    assert inv.status == "success" and inv.deliveries == 2
    assert inv.output == '{"expression":"1+1","result":2}'


def test_a_duplicate_delivery_leaves_a_step_with_a_live_lease_alone(engine):
    user, broker = engine
    run = new_run(user, "redelivery")
    tasks.llm_turn(str(run.id), 0)
    inv = ToolInvocation.objects.filter(run=run).first()
    # Another worker is running this call right now: its lease is fresh.
    ToolInvocation.objects.filter(pk=inv.pk).update(status="running", deliveries=1, heartbeat_at=timezone.now())
    before = snapshot(run)

    tasks.tool_call(str(run.id), inv.tool_call_id)
    tasks.llm_turn(str(run.id), 0)

    assert snapshot(run) == before


def test_a_step_delivered_past_the_cap_fails_the_run_cleanly(engine, settings):
    user, broker = engine
    run = new_run(user, "redelivery")
    LlmTurn.objects.filter(run=run, iteration=0).update(status="running", deliveries=settings.CHATFORGE_MAX_STEP_DELIVERIES)

    tasks.llm_turn(str(run.id), 0)

    run.refresh_from_db()
    assert run.status == "failed"
    assert "without finishing" in run.error
    assert Message.objects.get(run=run, role="assistant").status == "error"
    events = get_event_log().read(str(run.id), after=0)
    assert events[-1]["type"] == "run.failed" and events[-1]["data"]["error"] == run.error


def test_sweeper_re_enqueues_a_stalled_run(engine, settings):
    user, broker = engine
    run = new_run(user, "redelivery")
    broker.delete(*QUEUES)  # the broker lost the first message
    assert sweep_stalled_runs() == 0  # not stale yet
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=settings.CHATFORGE_RUN_STALL_S + 1))

    assert sweep_stalled_runs() == 1

    assert enqueued(broker) == [("chatforge.llm_turn", [str(run.id), 0])]
    tasks.llm_turn(str(run.id), 0)
    broker.delete(*QUEUES)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(days=1))
    sweep_stalled_runs()
    calls = sorted(ToolInvocation.objects.filter(run=run).values_list("tool_call_id", flat=True))
    assert enqueued(broker) == sorted(("chatforge.tool_call", [str(run.id), c]) for c in calls)


def test_a_provider_failure_mid_stream_fails_the_run_and_keeps_the_partial_text(engine, fake_llm):
    user, _ = engine
    broken = Reply(text="The answer begins like this and then", error_mid_stream=True)
    fake_llm.add_script("broken-stream", [broken])
    run = new_run(user, "broken-stream")

    tasks.llm_turn(str(run.id), 0)

    run.refresh_from_db()
    assert run.status == "failed" and run.error
    message = Message.objects.get(run=run, role="assistant")
    assert message.status == "error"
    assert message.content and broken.text.startswith(message.content)
    events = get_event_log().read(str(run.id), after=0)
    assert events[-1]["type"] == "run.failed"
    assert events[-1]["data"] == {"error": run.error, "message_id": str(message.id)}


def test_a_side_effecting_tool_runs_once_however_often_its_step_is_delivered(engine, fake_llm):
    import redis as redis_lib

    from tests.support.tools import EFFECTS_REDIS_URL

    user, _ = engine
    effects = redis_lib.Redis.from_url(EFFECTS_REDIS_URL)
    fake_llm.add_script("effect", [Reply(tool_calls=[("count_effect", {})]), Reply(text="done")])

    run = new_run(user, "effect")
    tasks.llm_turn(str(run.id), 0)
    inv = ToolInvocation.objects.get(run=run)
    tasks.tool_call(str(run.id), inv.tool_call_id)
    tasks.tool_call(str(run.id), inv.tool_call_id)
    assert int(effects.get(f"effect:{run.id}:{inv.tool_call_id}")) == 1

    # A delivery that finds the call started by a worker that died does not call it again.
    crashed = new_run(user, "effect")
    tasks.llm_turn(str(crashed.id), 0)
    inv = ToolInvocation.objects.get(run=crashed)
    ToolInvocation.objects.filter(pk=inv.pk).update(status="running", deliveries=1, heartbeat_at=None)
    tasks.tool_call(str(crashed.id), inv.tool_call_id)
    inv.refresh_from_db()
    assert effects.get(f"effect:{crashed.id}:{inv.tool_call_id}") is None
    assert inv.status == "error" and "not safe to run again" in inv.output


def test_each_failed_attempt_is_recorded_on_the_invocation(engine, fake_llm):
    user, _ = engine
    fake_llm.add_script("flaky", [Reply(tool_calls=[("flaky_once", {})]), Reply(text="done")])
    run = new_run(user, "flaky")
    tasks.llm_turn(str(run.id), 0)
    inv = ToolInvocation.objects.get(run=run)

    tasks.tool_call(str(run.id), inv.tool_call_id)

    inv.refresh_from_db()
    assert inv.status == "success" and inv.output == "worked on attempt 2"
    assert inv.attempts == 2
    assert "503 Service Unavailable" in inv.error  # the last failed attempt's error
    retries = [e for e in get_event_log().read(str(run.id), after=0) if e["type"] == "tool.retry"]
    assert [(r["data"]["tool_call_id"], r["data"]["attempt"]) for r in retries] == [(inv.tool_call_id, 1)]
    assert "503" in retries[0]["data"]["error"]


def test_sweeper_leaves_a_run_alone_while_a_live_worker_holds_its_step(engine, settings):
    user, broker = engine
    run = new_run(user, "redelivery")
    tasks.llm_turn(str(run.id), 0)
    broker.delete(*QUEUES)
    stale = timezone.now() - timedelta(seconds=settings.CHATFORGE_RUN_STALL_S + 1)
    # The run's heartbeat is old, but one call is running under a fresh lease.
    Run.objects.filter(pk=run.pk).update(heartbeat_at=stale)
    calls = list(ToolInvocation.objects.filter(run=run).order_by("position"))
    ToolInvocation.objects.filter(pk=calls[0].pk).update(status="running", heartbeat_at=timezone.now())
    ToolInvocation.objects.filter(pk=calls[1].pk).update(status="running", heartbeat_at=timezone.now())

    assert sweep_stalled_runs() == 0
    assert enqueued(broker) == []

    # Its worker died: the lease of one call expires, and only that call is re-enqueued.
    ToolInvocation.objects.filter(pk=calls[1].pk).update(heartbeat_at=stale)
    assert sweep_stalled_runs() == 1
    assert enqueued(broker) == [("chatforge.tool_call", [str(run.id), calls[1].tool_call_id])]
