"""Model turns retry transient provider failures with their provider's policy."""

from __future__ import annotations

import pytest

from chatforge.conversations.models import Conversation, Message, Run
from orchestration import tasks
from orchestration.event_log import get_event_log
from orchestration.services.runs import RunOptions, run_start
from tests.fakes.openai_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def model_env(settings, fake_llm, idle_broker, make_user):
    settings.OPENAI_BASE_URL = fake_llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.CHATFORGE_LLM_RETRY_INITIAL_S = 0.01
    settings.CHATFORGE_LLM_MAX_ATTEMPTS = 3
    user, _ = make_user()
    return user


def run_turn(user, model: str) -> tuple[Run, list[dict]]:
    run = run_start(user=user, conversation=Conversation.objects.create(user=user), content="hi",
                    options=RunOptions(model=model))
    tasks.llm_turn(str(run.id), 0)
    run.refresh_from_db()
    return run, get_event_log().read(str(run.id), after=0)


def test_transient_failures_are_retried_then_succeed(model_env, fake_llm):
    fake_llm.add_script("flaky-model", [Reply(text="Recovered.", fail_status=503, fail_times=2)])
    run, events = run_turn(model_env, "flaky-model")
    assert run.status == "completed"
    assert Message.objects.get(run=run, role="assistant").content == "Recovered."
    retries = [e["data"] for e in events if e["type"] == "llm.retry"]
    assert [(r["iteration"], r["attempt"]) for r in retries] == [(0, 1), (0, 2)]
    assert all(r["discard_text"] is False and r["retry_in_s"] >= 0 for r in retries)
    assert len(fake_llm.requests_for("flaky-model")) == 3


def test_a_bad_key_fails_at_once_with_a_message_naming_the_cause(model_env, fake_llm):
    fake_llm.add_script("locked-model", [Reply(text="never", fail_status=401, fail_times=10)])
    run, events = run_turn(model_env, "locked-model")
    assert run.status == "failed"
    assert "401" in run.error and "key" in run.error.lower()
    assert not [e for e in events if e["type"] == "llm.retry"]
    assert len(fake_llm.requests_for("locked-model")) == 1


def test_after_the_budget_the_run_fails_and_keeps_the_partial_text(model_env, fake_llm):
    fake_llm.add_script("broken-model", [Reply(text="Partial answer that breaks", error_mid_stream=True)])
    run, events = run_turn(model_env, "broken-model")
    assert run.status == "failed" and "gave up after 3 attempts" in run.error
    retries = [e["data"] for e in events if e["type"] == "llm.retry"]
    assert len(retries) == 2 and all(r["discard_text"] for r in retries)
    message = Message.objects.get(run=run, role="assistant")
    assert message.status == "error" and "Partial answer that breaks".startswith(message.content) and message.content
    assert len(fake_llm.requests_for("broken-model")) == 3
