"""The engine's side of a /v1 client's own tools: a call of one is recorded
and never enqueued; the round's server calls run (and are re-driven by the
sweeper if lost) while the client's are left alone; the run ends on the
round with ``finish_reason: "tool_calls"``; a run that carries on from the
client's results shows them to the model and stores them with its answer.
Steps are delivered by calling the Celery tasks in this process."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from chatforge.conversations.models import Conversation, Message, Run, ToolInvocation
from orchestration import tasks
from orchestration.event_log import get_event_log
from orchestration.services.runs import RunOptions, run_start
from orchestration.services.sweeper import sweep_stalled_runs
from tests.conftest import QUEUES
from tests.fakes.openai_server import Reply

from .test_redelivery import enqueued

pytestmark = pytest.mark.django_db(transaction=True)

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather.",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}


@pytest.fixture
def engine(settings, fake_llm, idle_broker, make_user):
    settings.OPENAI_BASE_URL = fake_llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    user, _ = make_user()
    return user, idle_broker, fake_llm


def start(user, model: str, **options) -> Run:
    return run_start(user=user, conversation=Conversation.objects.create(user=user), content="Weather?",
                     options=RunOptions(model=model, tools=["echo"], client_tools=[WEATHER], **options.pop("run", {})),
                     **options)


def test_a_mixed_round_runs_the_server_call_and_ends_with_the_clients_call(engine, settings):
    user, broker, fake_llm = engine
    fake_llm.add_script("mixed", [Reply(text="Checking.", tool_calls=[("echo", {"text": "a"}),
                                                                      ("get_weather", {"city": "Paris"})])])
    run = start(user, "mixed")
    broker.delete(*QUEUES)
    tasks.llm_turn(str(run.id), 0)

    offered = [t["function"]["name"] for t in fake_llm.requests_for("mixed")[0]["tools"]]
    assert offered == ["echo", "get_weather"]
    calls = dict(ToolInvocation.objects.filter(run=run).values_list("name", "status"))
    assert calls == {"echo": "pending", "get_weather": "client"}
    echo_id = ToolInvocation.objects.get(run=run, name="echo").tool_call_id
    assert enqueued(broker) == [("chatforge.tool_call", [str(run.id), echo_id])]
    assert Run.objects.get(pk=run.pk).pending_tool_calls == 1

    # The sweeper re-drives the lost server call, never the client's.
    broker.delete(*QUEUES)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(days=1))
    assert sweep_stalled_runs() == 1
    assert enqueued(broker) == [("chatforge.tool_call", [str(run.id), echo_id])]

    broker.delete(*QUEUES)
    tasks.tool_call(str(run.id), echo_id)
    run.refresh_from_db()
    assert (run.status, run.finish_reason) == ("completed", "tool_calls")
    assert enqueued(broker) == []  # no next model turn: the client answers next
    message = Message.objects.get(run=run, role="assistant")
    assert message.content == "Checking." and message.finish_reason == "tool_calls"
    assert [r["status"] for r in message.tool_rounds[0]["results"]] == ["success", "client"]
    events = get_event_log().read(str(run.id), after=0)
    weather_event = next(e for e in events if e["type"] == "tool_call" and e["data"]["name"] == "get_weather")
    assert weather_event["data"]["executor"] == "client"
    echo_event = next(e for e in events if e["type"] == "tool_call" and e["data"]["name"] == "echo")
    assert "executor" not in echo_event["data"]
    assert events[-1]["type"] == "run.completed" and events[-1]["data"]["finish_reason"] == "tool_calls"


def test_a_round_of_client_calls_only_ends_the_run_in_the_same_step(engine):
    user, broker, fake_llm = engine
    fake_llm.add_script("client-only", [Reply(tool_calls=[("get_weather", {"city": "Paris"})])])
    run = start(user, "client-only")
    broker.delete(*QUEUES)
    tasks.llm_turn(str(run.id), 0)
    run.refresh_from_db()
    assert (run.status, run.finish_reason, run.pending_tool_calls) == ("completed", "tool_calls", 0)
    assert enqueued(broker) == []


def test_a_run_that_carries_on_from_client_results(engine):
    user, broker, fake_llm = engine
    fake_llm.add_script("carry-on", lambda body: Reply(text="Sunny it is."))
    continued = [{"iteration": 0, "assistant_response": "Checking.",
                  "tool_calls": [{"id": "call_w", "name": "get_weather", "arguments": '{"city": "Paris"}'}],
                  "results": [{"tool_call_id": "call_w", "name": "get_weather", "output": "Sunny",
                               "status": "success", "execution_time_ms": 0}]}]
    run = start(user, "carry-on", continued_rounds=continued)
    tasks.llm_turn(str(run.id), 0)

    seen = fake_llm.requests_for("carry-on")[0]["messages"]
    assert [m["role"] for m in seen] == ["user", "assistant", "tool"]
    assert seen[1]["tool_calls"][0]["id"] == "call_w" and seen[2]["content"] == "Sunny"
    message = Message.objects.get(run=run, role="assistant")
    assert (message.content, message.finish_reason) == ("Sunny it is.", "stop")
    assert message.tool_rounds == continued
