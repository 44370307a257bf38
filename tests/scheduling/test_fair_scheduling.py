"""Fair scheduling through the engine: caps set in the admin's tables hold
steps back without sending them, the next step of a run under way goes
first, tool quotas and token budgets answer clearly, and the sweeper leaves
parked steps in line but hands on a dead worker's slot."""

from __future__ import annotations

import datetime
import time

import pytest
import redis
from django.conf import settings as django_settings
from rest_framework.test import APIClient

from chatforge.catalog.models import Assistant
from chatforge.conversations.models import Conversation, Run, ToolInvocation
from chatforge.scheduling.limits import forget_cached_limits
from chatforge.scheduling.models import ToolLimit, UsageCounter, UserLimits
from chatforge.scheduling.slots import PREFIX
from orchestration import tasks
from orchestration.services.runs import RunOptions, run_start
from orchestration.services.sweeper import sweep_stalled_runs
from tests.engine.test_redelivery import enqueued
from tests.fakes.openai_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def engine(settings, fake_llm, idle_broker, make_user):
    settings.OPENAI_BASE_URL = fake_llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.CHATFORGE_TOOL_REPEAT_LIMIT = 10
    client = redis.Redis.from_url(django_settings.CELERY_BROKER_URL)
    for key in client.scan_iter(PREFIX + "*"):
        client.delete(key)
    fake_llm.add_script("answer", lambda body: Reply(text="Done."))
    forget_cached_limits()
    yield idle_broker
    forget_cached_limits()


def start(user, model="answer", **options) -> Run:
    return run_start(user=user, conversation=Conversation.objects.create(user=user), content="go",
                     options=RunOptions(model=model, **options))


def turns(broker) -> list[str]:
    return [args[0] for task, args in enqueued(broker) if task == "chatforge.llm_turn"]


def calls(broker) -> list[str]:
    return [args[1] for task, args in enqueued(broker) if task == "chatforge.tool_call"]


def drain(broker) -> None:
    for queue in ("llm", "tools", "default"):
        broker.delete(queue)


def test_a_capped_users_runs_wait_unsent_while_another_users_start_at_once(engine, make_user):
    heavy, _ = make_user()
    light, _ = make_user()
    UserLimits.objects.create(user=heavy, max_running_steps=1)
    forget_cached_limits()
    first, second, third = start(heavy), start(heavy), start(heavy)
    assert turns(engine) == [str(first.id)]  # the others are parked: not in the broker at all
    other = start(light)
    assert str(other.id) in turns(engine)  # not behind the heavy user's backlog

    drain(engine)
    tasks.llm_turn(str(first.id), 0)  # ends: its slot goes to the oldest parked run
    assert Run.objects.get(pk=first.pk).status == "completed"
    assert turns(engine) == [str(second.id)]
    drain(engine)
    tasks.llm_turn(str(second.id), 0)
    assert turns(engine) == [str(third.id)]
    tasks.llm_turn(str(third.id), 0)
    assert Run.objects.get(pk=third.pk).status == "completed"


def test_the_next_step_of_a_run_under_way_goes_before_newer_runs(engine, fake_llm, make_user):
    fake_llm.add_script("tooling", [Reply(text="Looking.", tool_calls=[("echo", {"text": "x"})]),
                                    Reply(text="Found it.")])
    user, _ = make_user()
    UserLimits.objects.create(user=user, max_running_steps=1)
    forget_cached_limits()
    older = start(user, model="tooling")
    newer = start(user)
    drain(engine)
    tasks.llm_turn(str(older.id), 0)  # asks for a tool while holding the slot: the call parks
    call_id = ToolInvocation.objects.get(run=older).tool_call_id
    assert calls(engine) == [call_id] and turns(engine) == []  # the older run's call before the newer run
    drain(engine)
    tasks.tool_call(str(older.id), call_id)
    assert turns(engine) == [str(older.id)]  # its next turn, still ahead of the newer run
    drain(engine)
    tasks.llm_turn(str(older.id), 1)
    assert Run.objects.get(pk=older.pk).status == "completed"
    assert turns(engine) == [str(newer.id)]


def test_a_tool_concurrency_cap_holds_calls_of_one_round(engine, fake_llm, make_user):
    fake_llm.add_script("three", [Reply(text="", tool_calls=[("echo", {"text": str(i)}) for i in range(3)]),
                                  Reply(text="All three.")])
    ToolLimit.objects.create(tool_name="echo", max_concurrency=1)
    forget_cached_limits()
    user, _ = make_user()
    run = start(user, model="three")
    tasks.llm_turn(str(run.id), 0)
    ids = list(ToolInvocation.objects.filter(run=run).order_by("position").values_list("tool_call_id", flat=True))
    assert calls(engine) == [ids[0]]
    for i, call_id in enumerate(ids):
        drain(engine)
        tasks.tool_call(str(run.id), call_id)
        if i + 1 < len(ids):
            assert calls(engine) == [ids[i + 1]]
    assert turns(engine) == [str(run.id)]
    tasks.llm_turn(str(run.id), 1)
    assert Run.objects.get(pk=run.pk).status == "completed"


def test_an_assistant_cap_counts_every_users_runs(engine, make_user):
    Assistant.objects.create(name="scarce", max_running_steps=1)
    forget_cached_limits()
    a, _ = make_user()
    b, _ = make_user()
    first, second = start(a, assistant="scarce"), start(b, assistant="scarce")
    free = start(b)  # no assistant: not under its cap
    assert sorted(turns(engine)) == sorted([str(first.id), str(free.id)])
    drain(engine)
    tasks.llm_turn(str(first.id), 0)
    assert turns(engine) == [str(second.id)]


def test_a_used_up_daily_quota_is_the_models_tool_result(engine, fake_llm, make_user):
    fake_llm.add_script("twice", [Reply(text="", tool_calls=[("echo", {"text": "1"}), ("echo", {"text": "2"})]),
                                  Reply(text="Answered.")])
    ToolLimit.objects.create(tool_name="echo", daily_quota_per_user=1)
    forget_cached_limits()
    user, _ = make_user()
    run = start(user, model="twice")
    tasks.llm_turn(str(run.id), 0)
    for inv in ToolInvocation.objects.filter(run=run).order_by("position"):
        tasks.tool_call(str(run.id), inv.tool_call_id)
    first, second = ToolInvocation.objects.filter(run=run).order_by("position")
    assert first.status == "success"
    assert second.status == "error" and "daily quota of tool 'echo' (1 calls per user per day) is used up" in second.output
    assert "renews at" in second.output and not second.result["success"]
    assert UsageCounter.objects.get(user=user, kind="tool:echo").used == 1
    tasks.llm_turn(str(run.id), 1)
    sent = fake_llm.requests_for("twice")[-1]["messages"]
    assert any(m["role"] == "tool" and "daily quota" in m["content"] for m in sent)  # the model was told
    other, _ = make_user()  # a quota is per user
    run2 = start(other, model="twice")
    tasks.llm_turn(str(run2.id), 0)
    inv = ToolInvocation.objects.filter(run=run2).order_by("position").first()
    tasks.tool_call(str(run2.id), inv.tool_call_id)
    assert ToolInvocation.objects.get(pk=inv.pk).status == "success"


def test_a_used_up_token_budget_refuses_new_messages_and_stops_runs_before_a_turn(engine, fake_llm, make_user):
    usage = {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}
    fake_llm.add_script("costly", [Reply(text="", tool_calls=[("echo", {"text": "x"})], usage=usage),
                                   Reply(text="never")])
    user, token = make_user()
    UserLimits.objects.create(user=user, token_budget=25, token_budget_period="week")
    forget_cached_limits()
    run = start(user, model="costly")
    tasks.llm_turn(str(run.id), 0)
    assert UsageCounter.objects.get(user=user, kind="tokens").used == 30
    call_id = ToolInvocation.objects.get(run=run).tool_call_id
    tasks.tool_call(str(run.id), call_id)
    tasks.llm_turn(str(run.id), 1)  # the budget ran out during the first turn: no second turn
    run.refresh_from_db()
    assert run.status == "failed"
    assert "token budget of 25 tokens per week is used up (30 used)" in run.error
    assert "before its next model turn" in run.error
    assert len(fake_llm.requests_for("costly")) == 1

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    conversation = Conversation.objects.create(user=user)
    response = client.post(f"/api/conversations/{conversation.id}/messages/", {"content": "more"}, format="json")
    assert response.status_code == 429
    error = response.json()["error"]
    assert error["code"] == "token_budget_exhausted" and "renews at" in error["message"]
    assert error["details"]["used"] == 30 and int(response["Retry-After"]) > 0
    assert not conversation.messages.exists()  # nothing stored


def _held_and_parked(settings, make_user) -> tuple[Run, Run]:
    """Two runs of a user capped at one running step, with fast leases: the
    first holds the slot, the second waits in line."""
    settings.CHATFORGE_HEARTBEAT_S = 0.1
    settings.CHATFORGE_RUN_STALL_S = 0.5
    user, _ = make_user()
    UserLimits.objects.create(user=user, max_running_steps=1)
    forget_cached_limits()
    return start(user), start(user)


def test_the_sweeper_leaves_parked_steps_in_line_and_hands_on_a_dead_workers_slot(engine, settings, make_user):
    held, parked = _held_and_parked(settings, make_user)
    assert turns(engine) == [str(held.id)]
    drain(engine)
    # The worker that got ``held`` died without a trace: its slot's lease
    # lapses, and the sweeper's pass sends the parked run (and ``held``
    # again, whose own lease lapsed too).
    time.sleep(0.6)
    sweep_stalled_runs()
    assert turns(engine) == [str(parked.id)]  # sent once, by the hand-off (its run's clock restarted)
    # ``held`` was sent again too, and now waits in line behind the slot ``parked`` holds.
    from chatforge.scheduling.slots import scheduler
    assert scheduler().is_parked(f"turn:{held.id}:0")


def test_a_parked_run_is_not_taken_for_stalled(engine, settings, make_user):
    held, parked = _held_and_parked(settings, make_user)
    drain(engine)
    time.sleep(0.3)
    from chatforge.scheduling.slots import scheduler
    scheduler().renew([f"turn:{held.id}:0"])  # ``held`` is alive and renewing
    Run.objects.filter(pk=parked.pk).update(heartbeat_at=None)
    time.sleep(0.3)
    scheduler().renew([f"turn:{held.id}:0"])
    from orchestration.services.sweeper import run_redispatch
    assert run_redispatch(str(parked.id)) == "parked"
    assert turns(engine) == []


def test_v1_answers_a_used_up_token_budget_in_openais_shape(engine, make_user):
    from chatforge.scheduling.models import UsageCounter as Counter

    user, token = make_user()
    UserLimits.objects.create(user=user, token_budget=100)
    forget_cached_limits()
    Counter.objects.create(user=user, kind="tokens", day=datetime.datetime.now(datetime.UTC).date(), used=100)
    response = APIClient().post("/v1/chat/completions", {"model": "answer", "messages": [{"role": "user", "content": "hi"}]},
                                format="json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 429
    error = response.json()["error"]
    assert error["code"] == "token_budget_exhausted" and error["type"] == "rate_limit_exceeded"
    assert "token budget of 100 tokens per day is used up (100 used)" in error["message"]
    assert 0 < int(response["Retry-After"]) <= 86400
    assert not Run.objects.filter(user=user).exists()


def test_a_duplicate_delivery_leaves_the_live_deliverys_slot_alone(engine, make_user):
    from django.utils import timezone

    from chatforge.conversations.models import LlmTurn

    user, _ = make_user()
    UserLimits.objects.create(user=user, max_running_steps=1)
    forget_cached_limits()
    live, waiting = start(user), start(user)
    drain(engine)
    # Another worker runs ``live``'s turn right now (fresh lease): this
    # delivery's claim finds it taken and must not give that worker's slot away.
    LlmTurn.objects.filter(run=live, iteration=0).update(status="running", deliveries=1, heartbeat_at=timezone.now())
    tasks.llm_turn(str(live.id), 0)
    assert turns(engine) == []
    # Once the step is no longer running, a stray delivery gives the slot back.
    LlmTurn.objects.filter(run=live, iteration=0).update(status="completed")
    tasks.llm_turn(str(live.id), 0)
    assert turns(engine) == [str(waiting.id)]
