"""Error texts that join the provider's own words and our advice read as
sentences: one period between them, never "key.. Check", whether the
provider's text ends with a period or not. Each adapter is driven against its
fake server, so the text is the one a person sees."""

from __future__ import annotations

import re

import pytest

from chatforge.llm.providers.anthropic_adapter import AnthropicProvider
from chatforge.llm.providers.base import ChatMessage, ErrorKind, ProviderError, TurnRequest
from chatforge.llm.providers.error_text import with_hint
from chatforge.llm.providers.gemini_adapter import GeminiProvider
from chatforge.llm.providers.ollama_adapter import status_error
from chatforge.llm.providers.openai_compat import OpenAICompatibleProvider
from chatforge.llm.providers.openai_responses import OpenAIResponsesProvider
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.anthropic_server import Reply as AnthropicReply
from tests.fakes.gemini_server import FakeGeminiServer
from tests.fakes.gemini_server import text_reply as gemini_text_reply
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.openai_server import Reply as OpenAIReply

MODEL = "any-model"
# A full stop after a full stop, or after "!" / "?": the join bug, wherever it is.
DOUBLED = re.compile(r"[.!?]\.(?!\.)")


def ask(model: str = MODEL) -> TurnRequest:
    return TurnRequest(model=model, messages=[ChatMessage(role="user", content="Hello")], tools=[], options={},
                       stream=True)


def error_of(provider, request: TurnRequest | None = None) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        list(provider.stream_turn(request or ask()))
    return caught.value


@pytest.mark.parametrize(
    ("message", "joined"),
    [
        ("API key not valid. Please pass a valid API key.", "API key not valid. Please pass a valid API key. Hint."),
        ("invalid x-api-key", "invalid x-api-key. Hint."),
        ("Wrong key!", "Wrong key! Hint."),
        ("Is this a key?  ", "Is this a key? Hint."),
        ("Trailing…", "Trailing… Hint."),
    ],
)
def test_with_hint_ends_the_sentence_once(message: str, joined: str) -> None:
    assert with_hint(message, "Hint.") == joined


def test_gemini_wrong_key_text() -> None:
    with FakeGeminiServer(api_key="right-key") as server:
        server.add_script("gemini-2.5-flash", gemini_text_reply("unreachable"))
        error = error_of(GeminiProvider(base_url=server.base_url, api_key="wrong", timeout_s=20),
                         ask("gemini-2.5-flash"))

    assert error.kind == ErrorKind.AUTHENTICATION
    assert error.message.endswith(
        "rejected the API key (400 INVALID_ARGUMENT API_KEY_INVALID): API key not valid. Please pass a valid "
        "API key. Check GEMINI_API_KEY or your gemini_api_key secret."
    ), error.message
    assert not DOUBLED.search(error.message), error.message


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (401, "Invalid API key.", ("rejected the API key (401 authentication_error): Invalid API key. "
                                   "Check ANTHROPIC_API_KEY or your anthropic_api_key secret.")),
        (401, "invalid x-api-key", ("rejected the API key (401 authentication_error): invalid x-api-key. "
                                    "Check ANTHROPIC_API_KEY or your anthropic_api_key secret.")),
        (403, "Your key may not use this model.",
         ("refused access with this API key (403 permission_error): Your key may not use this model. "
          "Check ANTHROPIC_API_KEY or your anthropic_api_key secret.")),
        (404, "model: any-model.", ("does not know model 'any-model' or the endpoint (404 not_found_error): "
                                    "model: any-model. Check the model name.")),
        (402, "Your credit balance is too low.",
         ("refused the request for billing reasons (402 billing_error): Your credit balance is too low. Check "
          "the account's credit balance and spend limits in the Anthropic Console.")),
    ],
)
def test_anthropic_texts(status: int, message: str, expected: str) -> None:
    with FakeAnthropicServer(api_key="sk-right") as server:
        server.add_script(MODEL, [AnthropicReply(fail_status=status, fail_message=message)])
        error = error_of(AnthropicProvider(base_url=server.base_url, api_key="sk-right", timeout_s=10.0))
        where = f"Anthropic API at {server.base_url}"

    text = re.sub(r" \[request-id [^\]]+\]$", "", error.message)
    assert text == f"{where} {expected}", error.message
    assert not DOUBLED.search(error.message), error.message


@pytest.mark.parametrize("adapter", [OpenAICompatibleProvider, OpenAIResponsesProvider])
@pytest.mark.parametrize("message", ["Incorrect API key provided.", "Incorrect API key provided"])
def test_openai_wrong_key_texts(adapter, message: str) -> None:
    with FakeOpenAIServer(api_key="sk-right") as server:
        server.add_script(MODEL, [OpenAIReply(fail_status=401, fail_message=message)])
        error = error_of(adapter(base_url=server.base_url, api_key="sk-right", timeout_s=10))

    assert error.kind == ErrorKind.AUTHENTICATION
    assert error.message.endswith(
        "rejected the API key (401 invalid_api_key): Incorrect API key provided. Check the API key configured "
        "for this endpoint (for OpenAI: OPENAI_API_KEY or your openai_api_key secret)."
    ), error.message
    assert not DOUBLED.search(error.message), error.message


def test_ollama_puts_its_hint_before_the_servers_words() -> None:
    error = status_error(401, b'{"error": "unauthorized."}', {}, where="Ollama at http://o:11434", model=MODEL)
    assert error.message == (
        "Ollama at http://o:11434 rejected the API key; check the API key configured for this Ollama provider "
        "(ollama.com needs one) (401): unauthorized."
    )
