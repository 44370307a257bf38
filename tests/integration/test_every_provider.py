"""A run through the real workers completes with each provider kind, each
against a fake server speaking that vendor's real wire format. The models
are configured as admin rows, as an operator would."""

from __future__ import annotations

import importlib

import pytest

from chatforge.accounts.crypto import encrypt
from chatforge.conversations.models import Message
from chatforge.llm.models import LanguageModel, Provider
from tests.support.client import ApiClient, follow_run

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# kind -> (fake server module, server class)
FAKES = {
    "openai": ("tests.fakes.openai_server", "FakeOpenAIServer"),
    "openai_responses": ("tests.fakes.openai_server", "FakeOpenAIServer"),
    "anthropic": ("tests.fakes.anthropic_server", "FakeAnthropicServer"),
    "gemini": ("tests.fakes.gemini_server", "FakeGeminiServer"),
    "ollama": ("tests.fakes.ollama_server", "FakeOllamaServer"),
}


@pytest.fixture(scope="module")
def fakes():
    started = {}
    for module_name, class_name in sorted(set(FAKES.values())):
        server = getattr(importlib.import_module(module_name), class_name)()
        server.start()
        started[class_name] = server
    yield started
    for server in started.values():
        server.stop()


def _base_url(kind: str, server) -> str:
    # The OpenAI fake's base_url ends in /v1, as OpenAI-compatible base URLs do.
    return server.base_url


@pytest.mark.parametrize("kind", list(FAKES))
def test_a_two_round_run_completes_with_every_provider_kind(kind, stack, fakes, make_user):
    module_name, class_name = FAKES[kind]
    module = importlib.import_module(module_name)
    server = fakes[class_name]
    upstream = f"fake-{kind.replace('_', '-')}"
    server.add_script(upstream, [
        module.Reply(text="Checking both.", tool_calls=[("calculator", {"expression": "6*7"}),
                                                        ("echo", {"text": "hello"})]),
        module.Reply(text=f"Done via {kind}: 42 and hello."),
    ])
    provider = Provider.objects.create(name=f"fake-{kind}".replace("_", "-"), kind=kind,
                                       base_url=_base_url(kind, server), api_key_ciphertext=encrypt("test-key"))
    LanguageModel.objects.create(name=f"{kind}-model", provider=provider, upstream_name=upstream)
    _, token = make_user()
    api = ApiClient(stack.http_url, token)

    accepted = api.post_message(api.new_conversation(), "6*7 and echo hello", model=f"{kind}-model")
    events = follow_run(stack.ws_url, accepted["run_id"], token)

    assert events[-1]["type"] == "run.completed", (events[-1], stack.logs()[-3000:])
    outputs = {e["data"]["name"]: e["data"] for e in events if e["type"] == "tool_output"}
    assert outputs["calculator"]["output"] == '{"expression":"6*7","result":42}'
    assert outputs["echo"]["output"] == "hello"
    message = Message.objects.get(run_id=accepted["run_id"], role="assistant")
    assert message.content == f"Done via {kind}: 42 and hello."
    assert [c["name"] for c in message.tool_rounds[0]["tool_calls"]] == ["calculator", "echo"]
    assert message.usage.get("total_tokens", 0) > 0
