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


def test_a_responses_conversation_continues_from_the_stored_response(model_env, fake_llm):
    from chatforge.llm.models import LanguageModel, Provider

    provider = Provider.objects.create(name="resp", kind="openai_responses", base_url=fake_llm.base_url)
    LanguageModel.objects.create(name="resp-model", provider=provider, upstream_name="resp-upstream")
    fake_llm.add_script("resp-upstream", lambda body: Reply(text="Answer."))
    user = model_env
    conversation = Conversation.objects.create(user=user)
    for content in ("first question", "second question"):
        run = run_start(user=user, conversation=conversation, content=content, options=RunOptions(model="resp-model"))
        tasks.llm_turn(str(run.id), 0)
    first, second = fake_llm.requests_for("resp-upstream")[-2:]
    assert "previous_response_id" not in first
    assert second["previous_response_id"]
    assert second["input"] == [{"role": "user", "content": "second question"}]


def test_a_stored_response_that_is_gone_falls_back_to_the_full_history(model_env, fake_llm):
    from chatforge.llm.models import LanguageModel, Provider

    provider = Provider.objects.create(name="resp2", kind="openai_responses", base_url=fake_llm.base_url)
    LanguageModel.objects.create(name="resp-model-2", provider=provider, upstream_name="resp-upstream-2")
    fake_llm.add_script("resp-upstream-2", lambda body: Reply(text="Fresh answer."))
    user = model_env
    conversation = Conversation.objects.create(user=user)
    question = Message.objects.create(conversation=conversation, role="user", content="earlier question")
    Message.objects.create(conversation=conversation, role="assistant", content="earlier answer", parent=question,
                           model="resp-model-2", response_id="resp_expired_long_ago")
    run = run_start(user=user, conversation=conversation, content="new question", options=RunOptions(model="resp-model-2"))

    tasks.llm_turn(str(run.id), 0)

    run.refresh_from_db()
    assert run.status == "completed"
    sent = fake_llm.requests_for("resp-upstream-2")
    assert sent[0]["previous_response_id"] == "resp_expired_long_ago"
    assert "previous_response_id" not in sent[-1]
    assert [item.get("content") for item in sent[-1]["input"]] == ["earlier question", "earlier answer", "new question"]
