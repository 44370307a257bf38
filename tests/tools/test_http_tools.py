"""HTTP tools defined as data, run through the real executor against a local server."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest

from tests.tools.factories import make_tool, registry_of
from tests.tools.net.local_server import LocalServer, Reply
from tools import executor
from tools.backoff import backoff_delay
from tools.base import ToolContext
from tools.executor import ToolResult, execute_tool
from tools.net.http_tools import HttpToolConfig, make_http_tool
from tools.net.client import RetryAfter




OPEN_PARAMETERS: dict[str, Any] = {"type": "object"}


@pytest.fixture(autouse=True)
def no_jitter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Always wait the full backoff ceiling, so recorded delays are predictable."""
    monkeypatch.setattr(executor, "backoff_delay", functools.partial(backoff_delay, rand=lambda: 1.0))


class Sleeps(list[float]):
    """Records the executor's waits instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def run(
    config: HttpToolConfig,
    arguments: dict[str, Any] | None = None,
    *,
    context: ToolContext | None = None,
    sleeps: Sleeps | None = None,
    **options: Any,
) -> ToolResult:
    tool = make_http_tool(
        name="api", description="Call the test API.", parameters=OPEN_PARAMETERS, config=config, **options
    )
    return execute_tool(
        registry_of(tool),
        "api",
        arguments or {},
        context=context or ToolContext(),
        sleep=sleeps if sleeps is not None else Sleeps(),
    )


def secrets(**values: str) -> ToolContext:
    return ToolContext(user_id=1, secret_lookup=values.get)


def test_server_errors_are_retried_with_growing_delays(server: LocalServer) -> None:
    server.route("/flaky", Reply(503, "busy"), Reply(503, "busy"), Reply.json({"ok": True}))
    sleeps = Sleeps()
    result = run(HttpToolConfig(url=server.url("/flaky"), max_attempts=3), sleeps=sleeps)
    assert (result.status, result.result, result.attempts) == ("success", {"ok": True}, 3)
    assert sleeps == [0.5, 1.0]


def test_a_client_error_is_final_after_one_attempt(server: LocalServer) -> None:
    server.route("/bad", Reply.json({"error": {"message": "unknown city 'Xyz'"}}, status=400))
    result = run(HttpToolConfig(url=server.url("/bad")), {"city": "Xyz"})
    assert (result.status, result.attempts, len(server.requests)) == ("error", 1, 1)
    assert "the service answered 400 Bad Request: unknown city 'Xyz'" in result.error
    assert result.retryable_by_model


def test_a_long_server_message_is_trimmed(server: LocalServer) -> None:
    server.route("/forbidden", Reply(403, "no " * 1000, {"Content-Type": "text/plain"}))
    result = run(HttpToolConfig(url=server.url("/forbidden")))
    assert "403 Forbidden: no no" in result.error and result.error.endswith("...")
    assert len(result.error) < 400


def test_retry_after_is_honoured(server: LocalServer) -> None:
    server.route("/limited", Reply(429, "slow down", {"Retry-After": "2"}), Reply.json({"ok": True}))
    sleeps = Sleeps()
    result = run(HttpToolConfig(url=server.url("/limited"), backoff_initial_s=0.1), sleeps=sleeps)
    assert (result.status, result.attempts) == ("success", 2)
    assert sleeps[0] >= 2


def test_the_executor_waits_at_least_retry_after() -> None:
    """The executor change on its own: max(backoff, retry_after_s)."""
    calls: list[int] = []

    def handler(arguments: dict[str, Any], context: ToolContext) -> str:
        calls.append(1)
        if len(calls) == 1:
            raise RetryAfter("rate limited", retry_after_s=7.5)
        if len(calls) == 2:
            raise RetryAfter("rate limited", retry_after_s=0.0)
        return "done"

    sleeps = Sleeps()
    tool = make_tool(name="limited", handler=handler, max_attempts=3, backoff_initial_s=1, backoff_max_s=8)
    result = execute_tool(registry_of(tool), "limited", {}, sleep=sleeps)
    assert (result.result, sleeps) == ("done", [7.5, 2.0])


def test_a_slow_endpoint_times_out(server: LocalServer) -> None:
    server.route("/slow", Reply(200, "{}", {"Content-Type": "application/json"}, delay_s=3))
    result = run(HttpToolConfig(url=server.url("/slow"), timeout_s=0.3, max_attempts=1))
    assert result.status == "timeout"
    assert result.error == "Error: Tool 'api' timed out after 0.3 seconds."


def test_get_arguments_are_mapped_into_the_query(server: LocalServer) -> None:
    server.route("/weather", Reply.json({"temp": 21}))
    config = HttpToolConfig(url=server.url("/weather?v=2"), params_mapping={"location": "q"})
    result = run(config, {"location": "Paris, FR", "units": "metric", "tags": ["a", "b"]})
    assert result.result == {"temp": 21}
    assert server.requests[0].path == "/weather?v=2&q=Paris%2C+FR&units=metric&tags=a&tags=b"


def test_post_arguments_are_mapped_into_the_json_body(server: LocalServer) -> None:
    server.route("/tickets", Reply.json({"id": 7}, status=201))
    config = HttpToolConfig(url=server.url("/tickets"), method="POST", params_mapping={"summary": "title"})
    result = run(config, {"summary": "Printer on fire", "priority": 1}, side_effects="not_idempotent")
    assert result.result == {"id": 7}
    seen = server.requests[0]
    assert (seen.method, seen.path, seen.headers["content-type"]) == ("POST", "/tickets", "application/json")
    assert json.loads(seen.body) == {"title": "Printer on fire", "priority": 1}


@pytest.mark.parametrize(("side_effects", "sent"), [("read_only", None), ("idempotent", "run-1:call-1"),
                                                   ("not_idempotent", "run-1:call-1")])
def test_side_effecting_calls_carry_their_idempotency_key(server: LocalServer, side_effects: str, sent: str | None) -> None:
    server.route("/tickets", Reply.json({"id": 7}, status=201))
    config = HttpToolConfig(url=server.url("/tickets"), method="POST")
    run(config, {"summary": "x"}, side_effects=side_effects, context=ToolContext(run_id="run-1", tool_call_id="call-1"))
    assert server.requests[0].headers.get("idempotency-key") == sent


def test_tool_payloads_are_logged_only_when_allowed(caplog: pytest.LogCaptureFixture) -> None:
    tool = make_tool(name="echo_secretly", handler=lambda args, ctx: "visible-output")
    caplog.set_level("DEBUG", logger="tools.executor")
    execute_tool(registry_of(tool), "echo_secretly", {"text": "hidden-argument"})
    assert "hidden-argument" not in caplog.text and "visible-output" not in caplog.text
    executor.configure_payload_logging(True)
    try:
        execute_tool(registry_of(tool), "echo_secretly", {"text": "hidden-argument"})
    finally:
        executor.configure_payload_logging(False)
    assert "hidden-argument" in caplog.text and "visible-output" in caplog.text


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("$.data.current", {"temp": 21}),
        ("$.results[*].name", ["a", "b"]),
        ("$.results[0].name", "a"),
    ],
)
def test_response_path_extracts_the_result(server: LocalServer, path: str, expected: Any) -> None:
    server.route(
        "/r", Reply.json({"data": {"current": {"temp": 21}}, "results": [{"name": "a"}, {"name": "b"}]})
    )
    assert run(HttpToolConfig(url=server.url("/r"), response_path=path)).result == expected


def test_a_response_path_without_match_is_a_clear_error(server: LocalServer) -> None:
    server.route("/r", Reply.json({"data": {}}))
    result = run(HttpToolConfig(url=server.url("/r"), response_path="$.data.missing"))
    assert result.error == "Error executing tool 'api': the service's answer has nothing at $.data.missing"


def test_an_invalid_response_path_is_refused_at_start_up() -> None:
    with pytest.raises(ValueError, match="not a valid JSONPath"):
        HttpToolConfig(url="https://api.example.com/", response_path="$[")


def test_placeholders_come_from_the_users_secret_first(server: LocalServer) -> None:
    server.route("/k/ABC123", Reply.json({"echo": "key ABC123 and token user-token"}))
    config = HttpToolConfig(
        url=server.url("/k/${API_ID}"), headers={"Authorization": "Bearer ${WEATHER_API_KEY}"}
    )
    result = run(
        config,
        context=secrets(weather_api_key="user-token"),
        env_lookup={"WEATHER_API_KEY": "operator-token", "API_ID": "ABC123"}.get,
    )
    assert server.requests[0].headers["authorization"] == "Bearer user-token"
    assert server.requests[0].path == "/k/ABC123"
    # Secret values never come back to the model, even when the service echoes them.
    assert result.result == {"echo": "key [redacted] and token [redacted]"}


def test_placeholders_fall_back_to_the_operators_lookup(server: LocalServer) -> None:
    server.route("/x", Reply.json({}))
    config = HttpToolConfig(url=server.url("/x"), headers={"X-Api-Key": "${SERVICE_KEY}"})
    assert run(config, env_lookup={"SERVICE_KEY": "op-key"}.get).success
    assert server.requests[0].headers["x-api-key"] == "op-key"


def test_an_unresolved_placeholder_is_named_and_nothing_is_sent(server: LocalServer) -> None:
    config = HttpToolConfig(url=server.url("/x"), headers={"Authorization": "Bearer ${MISSING_KEY}"})
    result = run(config)
    assert "this tool needs ${MISSING_KEY}, which is not set" in result.error
    assert "'missing_key'" in result.error
    assert server.requests == []


def test_secrets_are_scrubbed_from_errors(server: LocalServer) -> None:
    server.route("/x", Reply(401, "invalid key sk-123456 for this account", {"Content-Type": "text/plain"}))
    config = HttpToolConfig(url=server.url("/x?key=${KEY}"))
    result = run(config, context=secrets(key="sk-123456"))
    assert "sk-123456" not in result.error
    assert "invalid key [redacted] for this account" in result.error


def test_allowed_domains_refuse_other_hosts(server: LocalServer) -> None:
    config = HttpToolConfig(url=server.url("/x"), allowed_domains=["api.example.com"])
    result = run(config)
    assert "is not one of this tool's allowed domains (api.example.com)" in result.error
    assert server.requests == []


def test_a_private_destination_is_refused_even_for_an_operator_url() -> None:
    result = run(HttpToolConfig(url="http://169.254.169.254/latest/meta-data/"))
    assert "169.254.169.254 is the cloud metadata address" in result.error
    assert result.attempts == 1


def test_the_policy_comes_from_the_config() -> None:
    config = HttpToolConfig(
        url="https://api.example.com/", timeout_s=4, max_attempts=5, backoff_initial_s=1, backoff_max_s=30
    )
    tool = make_http_tool(
        name="t", description="d", parameters=OPEN_PARAMETERS, config=config, side_effects="idempotent"
    )
    policy = tool.policy
    assert (policy.timeout_s, policy.max_attempts, policy.backoff_initial_s, policy.backoff_max_s) == (
        4,
        5,
        1,
        30,
    )
    assert policy.side_effects == "idempotent"
