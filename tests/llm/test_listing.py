"""The model list per user: which models a person can use now (a key for
the provider in the environment, on the provider, or among the person's own
secrets) and, for the others, why not and where the key goes — decided by
the same check a run's start makes, so a model listed as available is one a
run accepts."""

from __future__ import annotations

import pytest

from chatforge.accounts.crypto import encrypt
from chatforge.accounts.secrets import user_secret_set
from chatforge.llm.listing import model_list
from chatforge.llm.models import LanguageModel, Provider
from chatforge.llm.routing import missing_key_message

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def public_endpoints_without_keys(settings):
    settings.OPENAI_BASE_URL = "https://api.openai.com/v1"
    settings.OPENAI_API_KEY = ""
    settings.ANTHROPIC_BASE_URL = "https://api.anthropic.com"
    settings.ANTHROPIC_API_KEY = ""
    settings.CHATFORGE_DEFAULT_MODEL = "demo"


@pytest.fixture
def claude() -> LanguageModel:
    provider = Provider.objects.create(name="anthropic-main", kind="anthropic")
    return LanguageModel.objects.create(name="anthropic/claude-test", provider=provider)


def _by_id(listing: dict) -> dict[str, dict]:
    return {m["id"]: m for m in listing["models"]}


def test_without_a_key_anywhere_the_model_is_listed_unavailable_with_what_to_do(claude, django_user_model):
    user = django_user_model.objects.create(username="nokey")
    listing = model_list(user=user)
    model = _by_id(listing)["anthropic/claude-test"]
    assert model["available"] is False
    reason = model["unavailable_reason"]
    assert "anthropic_api_key" in reason and "Settings page" in reason, reason
    assert "provider 'anthropic-main'" in reason, reason
    assert listing["unavailable_providers"] == ["anthropic-main"]
    # The check a run's start makes agrees.
    assert missing_key_message("anthropic/claude-test", user_id=user.pk) is not None
    demo = _by_id(listing)["demo"]
    assert demo["available"] is True and demo["unavailable_reason"] is None
    assert listing["default"] == "demo" and listing["default_available"] is True


def test_the_users_own_key_makes_it_available_to_them_only(claude, django_user_model):
    owner = django_user_model.objects.create(username="owner")
    other = django_user_model.objects.create(username="other")
    user_secret_set(user=owner, name="anthropic_api_key", value="sk-ant-own")

    mine = _by_id(model_list(user=owner))["anthropic/claude-test"]
    assert mine["available"] is True and mine["unavailable_reason"] is None
    assert model_list(user=owner)["unavailable_providers"] == []
    assert _by_id(model_list(user=other))["anthropic/claude-test"]["available"] is False
    assert _by_id(model_list())["anthropic/claude-test"]["available"] is False  # no user: the server's keys only


def test_a_key_on_the_provider_or_in_the_environment_makes_it_available(claude, settings, django_user_model):
    user = django_user_model.objects.create(username="anyone")
    Provider.objects.filter(pk=claude.provider_id).update(api_key_ciphertext=encrypt("sk-ant-admin"))
    assert _by_id(model_list(user=user))["anthropic/claude-test"]["available"] is True

    Provider.objects.filter(pk=claude.provider_id).update(api_key_ciphertext="")
    assert _by_id(model_list(user=user))["anthropic/claude-test"]["available"] is False
    settings.ANTHROPIC_API_KEY = "sk-ant-env"
    assert _by_id(model_list(user=user))["anthropic/claude-test"]["available"] is True


def test_a_local_endpoint_needs_no_key(django_user_model):
    provider = Provider.objects.create(name="local-vllm", kind="openai", base_url="http://vllm.internal:8000/v1")
    LanguageModel.objects.create(name="local-vllm/qwen", provider=provider)
    user = django_user_model.objects.create(username="local")
    assert _by_id(model_list(user=user))["local-vllm/qwen"]["available"] is True


def test_disabled_models_and_providers_stay_out_and_the_rest_is_grouped_by_provider(claude):
    off = Provider.objects.create(name="off", kind="openai", enabled=False)
    LanguageModel.objects.create(name="off/model", provider=off)
    on = Provider.objects.create(name="b-local", kind="openai", base_url="http://local.test/v1")
    LanguageModel.objects.create(name="b-local/zeta", provider=on)
    LanguageModel.objects.create(name="b-local/alpha", provider=on)
    LanguageModel.objects.create(name="b-local/hidden", provider=on, enabled=False)
    ids = [m["id"] for m in model_list()["models"]]
    assert ids == ["demo", "anthropic/claude-test", "b-local/alpha", "b-local/zeta"]


def test_an_unavailable_default_model_says_so(settings, django_user_model):
    settings.CHATFORGE_DEFAULT_MODEL = "gpt-unconfigured"
    user = django_user_model.objects.create(username="default")
    listing = model_list(user=user)
    assert listing["default_available"] is False
    assert "openai_api_key" in listing["default_unavailable_reason"]
    assert "the server's OpenAI-compatible Chat Completions endpoint" in listing["default_unavailable_reason"]
    user_secret_set(user=user, name="openai_api_key", value="sk-own")
    assert model_list(user=user)["default_available"] is True
