"""Provider adapters share one HTTP client per process and SDK
(chatforge/llm/providers/shared_http.py): a turn no longer builds a TLS
context and a connection pool of its own, and a forked child gets its own."""

from __future__ import annotations

import os

from chatforge.llm.providers import shared_http
from chatforge.llm.providers.anthropic_adapter import AnthropicProvider
from chatforge.llm.providers.openai_compat import OpenAICompatibleProvider
from chatforge.llm.providers.openai_responses import OpenAIResponsesProvider


def _http(adapter):
    return adapter._client._client  # the SDK client's HTTP client


def test_adapters_of_one_sdk_share_the_http_client_of_the_process():
    chat = OpenAICompatibleProvider(base_url="http://127.0.0.1:1/v1", api_key="a", idle_timeout_s=5)
    other = OpenAICompatibleProvider(base_url="http://127.0.0.1:2/v1", api_key="b", idle_timeout_s=50)
    responses = OpenAIResponsesProvider(base_url="http://127.0.0.1:1/v1", api_key="a")
    assert _http(chat) is _http(other) is _http(responses)
    # Each keeps its own timeouts and key: the SDK sends them per request.
    assert chat._client.timeout.read == 5 and other._client.timeout.read == 50
    assert chat._client.api_key == "a" and other._client.api_key == "b"
    claude = AnthropicProvider(base_url="http://127.0.0.1:3", api_key="c")
    assert _http(claude) is not _http(chat)
    assert _http(claude) is _http(AnthropicProvider(base_url="http://127.0.0.1:4", api_key="d"))


def test_a_forked_child_does_not_reuse_its_parents_client():
    parent = shared_http.shared_http_client("test-kind", object)
    assert shared_http.shared_http_client("test-kind", object) is parent
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer through the pipe, then leave at once
        child = shared_http.shared_http_client("test-kind", object)
        os.write(write_end, b"own" if child is not parent else b"shared")
        os._exit(0)
    os.close(write_end)
    answer = os.read(read_end, 16)
    os.waitpid(pid, 0)
    assert answer == b"own"
