"""What a claim reads with the step in its one statement (Postgres) is what
the step would otherwise have queried: the route rows of the run's model,
the user's secrets, the earlier calls of the same tool; a claim marks the
run running; a first turn behind an active run is not claimed."""

from __future__ import annotations

import pytest

from chatforge.accounts.secrets import user_secret_set
from chatforge.conversations.models import Conversation, LlmTurn, Run, ToolInvocation
from chatforge.llm.models import LanguageModel, Provider
from chatforge.llm.routing import route_rows
from orchestration.services.claims import claim_invocation, claim_turn, extras_of
from orchestration.services.runs import OnActive, RunOptions, run_start

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def a_key(settings):
    """The runs here are claimed, never sent to a model; an OpenAI key keeps
    run_start from refusing models that would go to OpenAI without one."""
    settings.OPENAI_API_KEY = "test-key"


@pytest.fixture
def catalog():
    house = Provider.objects.create(name="house", kind="openai", base_url="http://127.0.0.1:1/v1")
    off = Provider.objects.create(name="off", kind="anthropic", enabled=False)
    LanguageModel.objects.create(name="house-model", provider=house, upstream_name="up-1")
    LanguageModel.objects.create(name="model-of-off", provider=off)
    LanguageModel.objects.create(name="disabled-model", provider=house, enabled=False)
    return house


def start(user, model: str, **kwargs) -> Run:
    return run_start(user=user, conversation=kwargs.pop("conversation", None) or Conversation.objects.create(user=user),
                     content="go", options=RunOptions(model=model), **kwargs)


def _key(rows):
    return (rows.model_row and (rows.model_row.pk, rows.model_row.provider.pk),
            rows.prefix_provider and rows.prefix_provider.pk)


@pytest.mark.parametrize("model", ["house-model", "house/any-name", "model-of-off", "disabled-model",
                                   "off/x", "openai/gpt-x", "plain", "house/"])
def test_a_turn_claim_reads_the_route_rows_the_query_would(catalog, make_user, idle_broker, model):
    user, _ = make_user()
    run = start(user, model)
    turn = claim_turn(str(run.id), 0)
    assert turn is not None
    assert _key(extras_of(turn).route_rows) == _key(route_rows(model))
    if model == "house-model":
        assert extras_of(turn).route_rows.model_row.upstream_name == "up-1"


def test_a_claim_reads_the_users_secrets_and_marks_the_run_running(make_user, idle_broker):
    user, _ = make_user()
    user_secret_set(user=user, name="openai_api_key", value="sk-own")
    run = start(user, "plain")
    turn = claim_turn(str(run.id), 0)
    extras = extras_of(turn)
    assert set(extras.user_ciphertexts) == {"openai_api_key"}
    assert extras.user_ciphertexts["openai_api_key"] != "sk-own"  # ciphertext, decrypted only where used
    assert extras.run_marked_running is True
    stored = Run.objects.get(pk=run.pk)
    assert (stored.status, stored.iteration) == ("running", 0) and stored.started_at is not None
    assert (turn.run.status, turn.run.iteration, turn.run.started_at) == ("running", 0, stored.started_at)
    assert turn.run.user_message.content == "go"
    assert claim_turn(str(run.id), 0) is None  # leased: a second delivery does not claim it


def test_a_tool_claim_reads_the_earlier_calls_of_the_same_tool(make_user, idle_broker):
    user, _ = make_user()
    run = start(user, "plain")
    LlmTurn.objects.filter(run=run, iteration=0).update(status="completed")
    for iteration, position, name, arguments in [(0, 0, "echo", '{"text":"a"}'), (0, 1, "calculator", "{}"),
                                                 (1, 0, "echo", '{"text":"b"}'), (1, 1, "echo", '{"text":"c"}')]:
        ToolInvocation.objects.create(run=run, tool_call_id=f"c{iteration}{position}", iteration=iteration,
                                      position=position, name=name, arguments=arguments,
                                      status="success" if iteration == 0 else "pending")
    inv = claim_invocation(str(run.id), "c11")
    assert extras_of(inv).earlier_arguments == ['{"text":"a"}', '{"text":"b"}']
    assert inv.run.pk == run.pk and extras_of(inv).route_rows is None


def test_a_first_turn_waiting_behind_an_active_run_is_not_claimed(make_user, idle_broker):
    user, _ = make_user()
    conversation = Conversation.objects.create(user=user)
    first = start(user, "plain", conversation=conversation)
    waiting = start(user, "plain", conversation=conversation, on_active=OnActive.ENQUEUE)
    assert waiting.blocked_by_id == first.id
    assert claim_turn(str(waiting.id), 0) is None
    Run.objects.filter(pk=first.pk).update(status="completed")
    assert claim_turn(str(waiting.id), 0) is not None
