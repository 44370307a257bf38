"""From a model name to its provider, key and capabilities."""

from __future__ import annotations

import pytest

from chatforge.accounts.crypto import encrypt
from chatforge.accounts.secrets import user_secret_set
from chatforge.adminsite.llm import ProviderForm
from chatforge.llm.models import LanguageModel, Provider
from chatforge.llm.routing import resolve_model

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def environment(settings):
    settings.OPENAI_BASE_URL = "http://openai.test/v1"
    settings.OPENAI_API_KEY = "env-openai"
    settings.ANTHROPIC_BASE_URL = "http://anthropic.test"
    settings.ANTHROPIC_API_KEY = "env-anthropic"
    settings.GEMINI_API_KEY = "env-gemini"
    settings.OLLAMA_BASE_URL = "http://ollama.test:11434"


def test_a_model_row_decides_provider_key_name_and_capabilities():
    provider = Provider.objects.create(name="claude-prod", kind="anthropic", base_url="http://proxy.test",
                                       api_key_ciphertext=encrypt("row-key"))
    LanguageModel.objects.create(name="smart", provider=provider, upstream_name="claude-sonnet-4-5",
                                 supports_reasoning=True, supports_tools=True)
    route = resolve_model("smart")
    assert (route.kind, route.base_url, route.api_key, route.upstream_model) == (
        "anthropic", "http://proxy.test", "row-key", "claude-sonnet-4-5")
    assert route.capabilities.reasoning and route.capabilities.tools


@pytest.mark.parametrize(
    ("model", "kind", "base_url", "key", "upstream"),
    [
        ("anthropic/claude-haiku-4-5", "anthropic", "http://anthropic.test", "env-anthropic", "claude-haiku-4-5"),
        ("gemini/gemini-2.5-flash", "gemini", "https://generativelanguage.googleapis.com", "env-gemini", "gemini-2.5-flash"),
        ("ollama/llama3.1", "ollama", "http://ollama.test:11434", "", "llama3.1"),
        ("responses/gpt-5", "openai_responses", "http://openai.test/v1", "env-openai", "gpt-5"),
        ("gpt-4o", "openai", "http://openai.test/v1", "env-openai", "gpt-4o"),
    ],
)
def test_prefixes_and_environment_defaults(model, kind, base_url, key, upstream):
    route = resolve_model(model)
    assert (route.kind, route.base_url, route.api_key, route.upstream_model) == (kind, base_url, key, upstream)


def test_a_provider_row_name_works_as_a_prefix():
    Provider.objects.create(name="local", kind="ollama", base_url="http://gpu-box:11434")
    route = resolve_model("local/qwen3:8b")
    assert (route.kind, route.base_url, route.upstream_model) == ("ollama", "http://gpu-box:11434", "qwen3:8b")
    assert route.capabilities.reasoning  # qwen3 takes reasoning controls


def test_reasoning_controls_only_for_models_that_take_them():
    assert resolve_model("gpt-5-mini").capabilities.reasoning
    assert not resolve_model("gpt-4o").capabilities.reasoning


def test_a_users_own_key_overrides_the_configured_one(make_user):
    user, _ = make_user()
    user_secret_set(user=user, name="anthropic_api_key", value="my-own-key")
    assert resolve_model("anthropic/claude-haiku-4-5", user_id=user.id).api_key == "my-own-key"
    other, _ = make_user()
    assert resolve_model("anthropic/claude-haiku-4-5", user_id=other.id).api_key == "env-anthropic"


def test_the_admin_form_stores_keys_encrypted_and_write_only():
    form = ProviderForm(data={"name": "p", "kind": "openai", "base_url": "", "default_model": "", "enabled": True,
                              "api_key": "sk-secret-value"})
    assert form.is_valid(), form.errors
    provider = form.save()
    assert provider.api_key_ciphertext and "sk-secret-value" not in provider.api_key_ciphertext
    assert resolve_model("p/gpt-4o").api_key == "sk-secret-value"
    # Editing without a key keeps it; the form never renders it.
    edit = ProviderForm(instance=provider, data={"name": "p", "kind": "openai", "base_url": "", "default_model": "",
                                                 "enabled": True, "api_key": ""})
    assert edit.is_valid() and "sk-secret-value" not in str(edit)
    edit.save()
    assert resolve_model("p/gpt-4o").api_key == "sk-secret-value"


class TestMissingKey:
    """A model that would go to a vendor's public endpoint with no key is
    named at once, with the setting to set (not left to fail on a 401)."""

    @pytest.fixture(autouse=True)
    def public_endpoints_without_keys(self, settings):
        settings.OPENAI_BASE_URL = "https://api.openai.com/v1"
        settings.OPENAI_API_KEY = ""
        settings.ANTHROPIC_BASE_URL = "https://api.anthropic.com"
        settings.ANTHROPIC_API_KEY = ""

    def test_an_unknown_model_names_the_missing_setting(self, django_user_model):
        from chatforge.llm.routing import missing_key_message

        message = missing_key_message("gpt-unknown", user_id=None)
        assert "OPENAI_API_KEY" in message and "https://api.openai.com/v1" in message
        assert "ANTHROPIC_API_KEY" in missing_key_message("anthropic/claude-x", user_id=None)

    def test_a_key_anywhere_is_enough(self, settings, django_user_model):
        from chatforge.llm.routing import missing_key_message

        user = django_user_model.objects.create(username="keyed")
        user_secret_set(user=user, name="openai_api_key", value="sk-own")
        assert missing_key_message("gpt-unknown", user_id=user.pk) is None
        provider = Provider.objects.create(name="p", kind="openai", base_url="https://api.openai.com/v1",
                                           api_key_ciphertext=encrypt("row-key"))
        LanguageModel.objects.create(name="configured", provider=provider)
        assert missing_key_message("configured", user_id=None) is None
        settings.OPENAI_BASE_URL = "http://vllm.internal:8000/v1"  # a local server may need no key
        assert missing_key_message("gpt-unknown", user_id=None) is None
