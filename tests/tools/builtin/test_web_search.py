"""The web_search tool against a fake Tavily on loopback: the request it sends,
the text the model reads, and each failure's exact wording and retry class."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.tools.factories import registry_of
from tools.base import ToolContext
from tools.builtin.web_search import (
    WEB_SEARCH,
    configure_web_search,
    format_results,
    web_search_config,
)
from tools.executor import ToolResult, execute_tool

DEFAULT_KEY = "tvly-operator-default-key"
USER_KEY = "tvly-user-own-key-7f3a9c"

TAVILY_BODY = {
    "query": "django release",
    "answer": "Django 5.2 is the current LTS release.",
    "results": [
        {"title": "Django 5.2 release notes", "url": "https://docs.djangoproject.com/en/5.2/releases/5.2/",
         "content": "Welcome to Django 5.2!", "score": 0.9},
        {"title": "Download Django", "url": "https://www.djangoproject.com/download/",
         "content": "The latest official version is 5.2.", "score": 0.8},
    ],
}


@dataclass
class FakeTavily:
    """A Tavily stand-in: answers ``POST /search`` with the queued replies, in
    order (the last one repeats), and records every request."""

    replies: list[tuple[int, Any]] = field(default_factory=lambda: [(200, TAVILY_BODY)])
    requests: list[dict[str, Any]] = field(default_factory=list)
    base_url: str = ""

    def reply(self, *replies: tuple[int, Any]) -> None:
        self.replies = list(replies)


@pytest.fixture
def tavily() -> Iterator[FakeTavily]:
    fake = FakeTavily()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            with lock:
                fake.requests.append({
                    "path": self.path,
                    "authorization": self.headers.get("Authorization"),
                    "body": json.loads(self.rfile.read(length)),
                })
                status, body = fake.replies[0] if len(fake.replies) == 1 else fake.replies.pop(0)
            payload = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    fake.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    previous = web_search_config()
    configure_web_search(base_url=fake.base_url + "/", default_api_key=DEFAULT_KEY)
    try:
        yield fake
    finally:
        configure_web_search(base_url=previous.base_url, default_api_key=previous.default_api_key)
        server.shutdown()
        server.server_close()


def user_context(secrets: dict[str, str]) -> ToolContext:
    return ToolContext(run_id="run-1", tool_call_id="call-1", user_id=7, secret_lookup=secrets.get)


def search(
    arguments: dict[str, Any], context: ToolContext = ToolContext(), sleeps: list[float] | None = None
) -> ToolResult:
    return execute_tool(
        registry_of(WEB_SEARCH), "web_search", arguments, context=context,
        sleep=(sleeps if sleeps is not None else []).append,
    )


def test_sends_the_query_and_options_with_the_default_key(tavily: FakeTavily) -> None:
    result = search({"query": "  django release ", "max_results": 3, "search_depth": "advanced",
                     "include_answer": True})

    assert result.success, result.error
    [request] = tavily.requests
    assert request["path"] == "/search"
    assert request["authorization"] == f"Bearer {DEFAULT_KEY}"
    assert request["body"] == {"query": "django release", "max_results": 3, "search_depth": "advanced",
                               "include_answer": True}


def test_defaults_fill_in_unset_options(tavily: FakeTavily) -> None:
    search({"query": "django"})

    assert tavily.requests[0]["body"] == {"query": "django", "max_results": 5, "search_depth": "basic",
                                          "include_answer": False}


def test_the_users_own_key_beats_the_default(tavily: FakeTavily) -> None:
    result = search({"query": "django"}, context=user_context({"tavily_api_key": USER_KEY}))

    assert result.success
    assert tavily.requests[0]["authorization"] == f"Bearer {USER_KEY}"
    assert USER_KEY not in json.dumps(tavily.requests[0]["body"])


def test_output_is_the_answer_then_numbered_results(tavily: FakeTavily) -> None:
    result = search({"query": "django release", "include_answer": True})

    assert result.result == (
        "Answer: Django 5.2 is the current LTS release.\n"
        "\n"
        "Search Results:\n"
        "1. Django 5.2 release notes\n"
        "   URL: https://docs.djangoproject.com/en/5.2/releases/5.2/\n"
        "   Welcome to Django 5.2!\n"
        "2. Download Django\n"
        "   URL: https://www.djangoproject.com/download/\n"
        "   The latest official version is 5.2."
    )


def test_formatting_without_answer_and_without_results() -> None:
    assert format_results("q", {"results": [{"title": "T", "url": "https://e.test/", "content": ""}]}) == (
        "Search Results:\n1. T\n   URL: https://e.test/"
    )
    assert format_results("nothing here", {"answer": None, "results": []}) == (
        'No results found for "nothing here".'
    )


@pytest.mark.parametrize(
    ("status", "body", "expected", "attempts"),
    [
        (400, {"error": "max_results must be at most 20"},
         "Invalid request parameters: max_results must be at most 20. "
         "Please adjust the tool call parameters and try again.", 1),
        (401, {"detail": {"error": "Unauthorized: missing or invalid API key."}},
         "Tavily API authentication failed: Unauthorized: missing or invalid API key. "
         "(Check TAVILY_API_KEY configuration)", 1),
        (403, {"message": "Forbidden"},
         "Tavily API authentication failed: Forbidden (Check TAVILY_API_KEY configuration)", 1),
        (429, {"error": "Too many requests"},
         "Tavily API rate limit exceeded: Too many requests (API quota exhausted)", 2),
        (500, "upstream exploded",
         "Tavily service error (500): upstream exploded (Please try again later)", 2),
        (503, "",
         "Tavily service error (503): Unknown error (Please try again later)", 2),
    ],
)
def test_error_statuses_map_to_the_documented_texts(
    tavily: FakeTavily, status: int, body: Any, expected: str, attempts: int
) -> None:
    tavily.reply((status, body))
    sleeps: list[float] = []

    result = search({"query": "django"}, sleeps=sleeps)

    assert result.status == "error"
    assert result.error == f"Error executing tool 'web_search': {expected}"
    assert not result.retryable_by_model
    # 429 and 5xx are transient: retried once (policy max_attempts=2); the rest are final.
    assert result.attempts == attempts == len(tavily.requests)
    assert len(sleeps) == attempts - 1


@pytest.mark.parametrize("status", [429, 502])
def test_a_transient_failure_then_success_succeeds(tavily: FakeTavily, status: int) -> None:
    tavily.reply((status, {"error": "busy"}), (200, TAVILY_BODY))
    sleeps: list[float] = []

    result = search({"query": "django"}, sleeps=sleeps)

    assert result.success
    assert result.attempts == 2
    assert len(sleeps) == 1


def test_without_any_key_it_says_how_to_configure(tavily: FakeTavily) -> None:
    configure_web_search(base_url=tavily.base_url, default_api_key=None)

    result = search({"query": "django"}, context=user_context({}))

    assert result.error == (
        "Error executing tool 'web_search': web search is not configured: add a Tavily API key in "
        "your settings (tavily_api_key) or ask the operator to set TAVILY_API_KEY."
    )
    assert result.attempts == 1
    assert tavily.requests == []


def test_an_unreachable_service_is_transient() -> None:
    previous = web_search_config()
    configure_web_search(base_url="http://127.0.0.1:9", default_api_key=DEFAULT_KEY)  # discard port
    try:
        result = search({"query": "django"})
    finally:
        configure_web_search(base_url=previous.base_url, default_api_key=previous.default_api_key)

    assert result.status == "error"
    assert result.attempts == 2
    assert result.error is not None and "Could not reach Tavily" in result.error


@pytest.mark.parametrize(
    "arguments",
    [{}, {"query": ""}, {"query": "x", "max_results": 11}, {"query": "x", "max_results": 0},
     {"query": "x", "search_depth": "deep"}, {"query": "x", "include_answer": "yes"},
     {"query": "x", "extra": 1}],
)
def test_bad_arguments_are_the_models_to_fix(tavily: FakeTavily, arguments: dict[str, Any]) -> None:
    result = search(arguments)

    assert result.status == "error" and result.retryable_by_model
    assert tavily.requests == []


def test_a_blank_query_is_an_argument_error(tavily: FakeTavily) -> None:
    result = search({"query": "   "})

    assert result.retryable_by_model
    assert tavily.requests == []


def test_keys_never_reach_the_logs(tavily: FakeTavily, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    configure_web_search(base_url=tavily.base_url, default_api_key=DEFAULT_KEY)

    search({"query": "django"}, context=user_context({"tavily_api_key": USER_KEY}))
    tavily.reply((401, {"error": "bad key"}))
    search({"query": "django"}, context=user_context({"tavily_api_key": USER_KEY}))
    search({"query": "django"})

    assert caplog.records, "expected some log lines at DEBUG"
    assert USER_KEY not in caplog.text
    assert DEFAULT_KEY not in caplog.text


def test_tool_definition() -> None:
    assert WEB_SEARCH.name == "web_search"
    assert WEB_SEARCH.policy.timeout_s == 20.0
    assert WEB_SEARCH.policy.max_attempts == 2
    assert WEB_SEARCH.policy.side_effects == "read_only"
    assert WEB_SEARCH.parameters["additionalProperties"] is False
    assert WEB_SEARCH.parameters["required"] == ["query"]


@pytest.mark.parametrize(("context", "key"), [(None, DEFAULT_KEY), ("user", USER_KEY)])
def test_a_key_the_service_echoes_never_reaches_the_model_or_the_logs(
    tavily: FakeTavily, caplog: pytest.LogCaptureFixture, context: str | None, key: str
) -> None:
    tavily.reply((401, {"detail": {"error": f"invalid key: Bearer {key}"}}))
    call_context = user_context({"tavily_api_key": USER_KEY}) if context else ToolContext()

    with caplog.at_level(logging.DEBUG):
        result = search({"query": "django"}, context=call_context)

    assert tavily.requests[0]["authorization"] == f"Bearer {key}"  # the key was used...
    assert result.status == "error" and "invalid key: Bearer [redacted]" in result.error
    assert key not in json.dumps(result.as_dict())  # ...and is in nothing that comes back
    assert key not in caplog.text
