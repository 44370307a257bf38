"""Streamed turns keep their connection to the model
(chatforge/llm/providers/connection_reuse.py).

The SDKs stop reading at a stream's terminal event and close the response
with the end of the body unread, which makes the HTTP client drop the
connection: every turn paid a new connection (to a real provider, a TCP and
TLS handshake). Counted here at the fake servers, over real HTTP, with a
new adapter per turn as the engine makes them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chatforge.llm.providers.anthropic_adapter import AnthropicProvider
from chatforge.llm.providers.base import ChatMessage, TextDelta, TurnRequest, TurnResult
from chatforge.llm.providers.gemini_adapter import GeminiProvider
from chatforge.llm.providers.ollama_adapter import OllamaProvider
from chatforge.llm.providers.openai_compat import OpenAICompatibleProvider
from chatforge.llm.providers.openai_responses import OpenAIResponsesProvider
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.anthropic_server import Reply as AnthropicReply
from tests.fakes.gemini_server import FakeGeminiServer
from tests.fakes.gemini_server import Reply as GeminiReply
from tests.fakes.ollama_server import FakeOllamaServer
from tests.fakes.ollama_server import Reply as OllamaReply
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.providers.streams import collect

MODEL = "fake-model"
ANSWER = "A streamed answer of a few words."


def ask() -> TurnRequest:
    return TurnRequest(model=MODEL, messages=[ChatMessage(role="user", content="Hello")], tools=[], options={},
                       stream=True)


@pytest.fixture
def openai_fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(api_key="sk-test") as fake:
        yield fake


@pytest.fixture
def anthropic_fake() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer(api_key="sk-ant") as fake:
        yield fake


def chat(server: FakeOpenAIServer, **kwargs) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(base_url=server.base_url, api_key="sk-test", timeout_s=30, **kwargs)


def responses(server: FakeOpenAIServer) -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider(base_url=server.base_url, api_key="sk-test", timeout_s=30)


def claude(server: FakeAnthropicServer) -> AnthropicProvider:
    return AnthropicProvider(base_url=server.base_url, api_key="sk-ant", timeout_s=30)


def four_turns_on_one_connection(fake, adapter_for_turn: Callable[[], Any]) -> None:
    for _ in range(4):
        _, result = collect(adapter_for_turn().stream_turn(ask()))
        assert result.text == ANSWER
    assert fake.connections == 1


@pytest.mark.parametrize("adapter", [chat, responses], ids=["chat-completions", "responses"])
def test_openai_turns_share_one_connection(openai_fake: FakeOpenAIServer,
                                           adapter: Callable[[FakeOpenAIServer], Any]) -> None:
    # Chunks further apart than the drain's bound: each close bounds the
    # read timeout of its own response only, never the next turn's.
    openai_fake.add_script(MODEL, lambda _body: Reply(text=ANSWER, chunk_delay_s=0.02))
    four_turns_on_one_connection(openai_fake, lambda: adapter(openai_fake))
    assert len(openai_fake.requests) == 4


def test_anthropic_turns_share_one_connection(anthropic_fake: FakeAnthropicServer) -> None:
    anthropic_fake.add_script(MODEL, lambda _body: AnthropicReply(text=ANSWER))
    four_turns_on_one_connection(anthropic_fake, lambda: claude(anthropic_fake))


def test_gemini_turns_share_one_connection() -> None:
    """One adapter per endpoint and key (the engine caches them), so its
    client's pool serves every turn."""
    with FakeGeminiServer(api_key="g-key") as fake:
        fake.add_script(MODEL, lambda _body: GeminiReply(text=ANSWER))
        gemini = GeminiProvider(base_url=fake.base_url, api_key="g-key", timeout_s=30)
        four_turns_on_one_connection(fake, lambda: gemini)


def test_ollama_turns_share_one_connection() -> None:
    with FakeOllamaServer() as fake:
        fake.add_script(MODEL, lambda _body: OllamaReply(text=ANSWER))
        ollama = OllamaProvider(base_url=fake.base_url, api_key="", timeout_s=30)
        four_turns_on_one_connection(fake, lambda: ollama)


def test_a_stream_abandoned_mid_answer_is_closed_and_the_next_turn_connects_again(
        openai_fake: FakeOpenAIServer) -> None:
    """A cancelled turn stops reading mid-answer: its connection, with the
    rest of a live answer on it, cannot be reused and is closed."""
    openai_fake.add_script(MODEL, lambda _body: Reply(text=" ".join(["word"] * 200), chunk_delay_s=0.02))
    stream = chat(openai_fake).stream_turn(ask())
    assert isinstance(next(stream), TextDelta)
    stream.close()  # what the engine does when the run is cancelled

    # Slower than the drain's bound between chunks: the bound was set for
    # the abandoned response only, not for the next one.
    openai_fake.add_script(MODEL, lambda _body: Reply(text=ANSWER, chunk_delay_s=0.02))
    _, result = collect(chat(openai_fake).stream_turn(ask()))

    assert result.text == ANSWER
    assert openai_fake.connections == 2


def test_a_server_that_keeps_the_body_open_after_done_does_not_hold_the_turn(
        openai_fake: FakeOpenAIServer) -> None:
    """After ``[DONE]`` the rest of the body is read for a moment only: a
    server that leaves it open costs its connection, not the turn's time
    (the adapter's idle timeout here is ten minutes)."""
    openai_fake.add_script(MODEL, lambda _body: Reply(text=ANSWER, linger_s=60))
    outcome: list[TurnResult] = []

    def turn() -> None:
        _, result = collect(chat(openai_fake, idle_timeout_s=600).stream_turn(ask()))
        outcome.append(result)

    worker = threading.Thread(target=turn, daemon=True)
    worker.start()
    worker.join(timeout=20)

    assert not worker.is_alive(), "the turn waited for the end of the body"
    assert outcome[0].text == ANSWER
