"""execute_tool: every way a call can fail, and the exact text the model gets."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pytest

from tools.base import Handler, Tool, ToolContext
from tools.errors import ToolArgumentError, ToolError, TransientToolError
from tools.executor import ToolResult, execute_tool
from tests.tools.factories import make_tool, registry_of, return_arguments

NOTE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "maxLength": 10},
        "tags": {"type": "array", "items": {"type": "string"}},
        "priority": {"type": "integer", "minimum": 1},
    },
    "required": ["text"],
    "additionalProperties": False,
}

ANY_OF_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"when": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}]}},
}

WIDE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {f"f{i}": {"type": "integer"} for i in range(7)},
    "additionalProperties": False,
}


def raising(error: BaseException) -> Handler:
    def handler(arguments: dict[str, Any], context: ToolContext) -> Any:
        raise error

    return handler


@dataclass(frozen=True)
class Case:
    id: str
    arguments: str | dict[str, Any] | None
    error: str
    tool: Tool = make_tool(name="note", parameters=NOTE_SCHEMA)
    name: str = "note"
    retryable_by_model: bool = True
    attempts: int = 0


CASES = [
    Case(
        "unknown tool",
        "{}",
        "Error: Unknown tool 'nope'. Available tools: note. "
        "Please check the tool name and try again.",
        name="nope",
    ),
    Case(
        "invalid JSON",
        '{"text": "hi"',
        "Error: Invalid JSON in tool arguments. Please check the JSON syntax and try again. "
        'Arguments received: {"text": "hi".',
    ),
    Case(
        "JSON array",
        '["hi"]',
        "Error: Tool arguments must be a JSON object, got an array. "
        'Please check the arguments and try again. Arguments received: ["hi"].',
    ),
    Case(
        "JSON string",
        '"hi"',
        "Error: Tool arguments must be a JSON object, got a string. "
        'Please check the arguments and try again. Arguments received: "hi".',
    ),
    Case(
        "JSON null",
        "null",
        "Error: Tool arguments must be a JSON object, got null. "
        "Please check the arguments and try again. Arguments received: null.",
    ),
    Case(
        "not a dict",
        [1, 2],  # type: ignore[arg-type]
        "Error: Tool arguments must be a JSON object, got an array. "
        "Please check the arguments and try again. Arguments received: [1,2].",
    ),
    Case(
        "missing required field",
        "{}",
        "Error: Invalid arguments for tool 'note': $: 'text' is a required property. "
        "Please check the arguments and try again.",
    ),
    Case(
        "wrong type",
        '{"text": 5}',
        "Error: Invalid arguments for tool 'note': $.text: 5 is not of type 'string'. "
        "Please check the arguments and try again.",
    ),
    Case(
        "unexpected field",
        {"text": "hi", "colour": "red"},
        "Error: Invalid arguments for tool 'note': $: Additional properties are not allowed "
        "('colour' was unexpected). Please check the arguments and try again.",
    ),
    Case(
        "nested path",
        {"text": "hi", "tags": ["ok", 3]},
        "Error: Invalid arguments for tool 'note': $.tags[1]: 3 is not of type 'string'. "
        "Please check the arguments and try again.",
    ),
    Case(
        "several problems, best first",
        {"text": "far too long text", "priority": 0, "extra": True},
        "Error: Invalid arguments for tool 'note': "
        "$: Additional properties are not allowed ('extra' was unexpected); "
        "$.text: 'far too long text' is too long; "
        "$.priority: 0 is less than the minimum of 1. "
        "Please check the arguments and try again.",
    ),
    Case(
        "problems are capped",
        {f"f{i}": "x" for i in range(7)},
        "Error: Invalid arguments for tool 'wide': "
        + "; ".join(f"$.f{i}: 'x' is not of type 'integer'" for i in range(5))
        + "; and 2 more problems. Please check the arguments and try again.",
        tool=make_tool(name="wide", parameters=WIDE_SCHEMA),
        name="wide",
    ),
    Case(
        "anyOf reports the closest branch",
        {"when": -1},
        "Error: Invalid arguments for tool 'when': $.when: -1 is less than the minimum of 0. "
        "Please check the arguments and try again.",
        tool=make_tool(name="when", parameters=ANY_OF_SCHEMA),
        name="when",
    ),
    Case(
        "handler argument error",
        "{}",
        "Error executing tool 'h': start must be before end. Please check the arguments and try again.",
        tool=make_tool(name="h", handler=raising(ToolArgumentError("start must be before end"))),
        name="h",
        attempts=1,
    ),
    Case(
        "handler argument error ending in a period",
        "{}",
        "Error executing tool 'h': Bad date. Please check the arguments and try again.",
        tool=make_tool(name="h", handler=raising(ToolArgumentError("Bad date."))),
        name="h",
        attempts=1,
    ),
    Case(
        "final tool error",
        "{}",
        "Error executing tool 'h': quota exhausted",
        tool=make_tool(name="h", handler=raising(ToolError("quota exhausted"))),
        name="h",
        retryable_by_model=False,
        attempts=1,
    ),
    Case(
        "transient error without retries",
        "{}",
        "Error executing tool 'h': upstream returned 503",
        tool=make_tool(name="h", handler=raising(TransientToolError("upstream returned 503"))),
        name="h",
        retryable_by_model=False,
        attempts=1,
    ),
    Case(
        "unexpected exception",
        "{}",
        "Error executing tool 'h': KeyError: 'missing'",
        tool=make_tool(name="h", handler=raising(KeyError("missing"))),
        name="h",
        retryable_by_model=False,
        attempts=1,
    ),
    Case(
        "unexpected exception without message",
        "{}",
        "Error executing tool 'h': RuntimeError",
        tool=make_tool(name="h", handler=raising(RuntimeError())),
        name="h",
        retryable_by_model=False,
        attempts=1,
    ),
    Case(
        "result that is not JSON",
        "{}",
        "Error executing tool 'h': the tool returned a result that is not valid JSON "
        "(Object of type set is not JSON serializable)",
        tool=make_tool(name="h", handler=lambda arguments, context: {1, 2}),
        name="h",
        retryable_by_model=False,
        attempts=1,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_error_paths(case: Case) -> None:
    result = execute_tool(registry_of(case.tool), case.name, case.arguments)

    assert result.status == "error"
    assert not result.success
    assert result.error == case.error
    assert result.output_text() == case.error
    assert result.retryable_by_model is case.retryable_by_model
    assert result.attempts == case.attempts
    assert result.result is None


def test_unknown_tool_with_empty_registry() -> None:
    result = execute_tool(registry_of(), "x", None)
    assert result.error == (
        "Error: Unknown tool 'x'. Available tools: (none). Please check the tool name and try again."
    )


def test_huge_raw_arguments_are_clipped_in_the_error() -> None:
    raw = "{" + "x" * 5000
    error = execute_tool(registry_of(make_tool()), "sample", raw).error

    assert error is not None
    assert error.endswith("... (4501 more characters).")
    assert len(error) < 800


@pytest.mark.parametrize("arguments", [None, "", "{}", {}])
def test_missing_arguments_mean_an_empty_object(arguments: str | dict[str, Any] | None) -> None:
    result = execute_tool(registry_of(make_tool()), "sample", arguments)

    assert result.success
    assert result.result == {}


def test_handler_gets_parsed_arguments_and_context() -> None:
    seen: list[tuple[dict[str, Any], ToolContext]] = []

    def handler(arguments: dict[str, Any], context: ToolContext) -> str:
        seen.append((arguments, context))
        return "ok"

    context = ToolContext(run_id="run", tool_call_id="call", user_id=7)
    result = execute_tool(
        registry_of(make_tool(name="note", parameters=NOTE_SCHEMA, handler=handler)),
        "note",
        '{"text": "héllo", "tags": ["a"]}',
        context=context,
    )

    assert result == ToolResult(
        tool_name="note", status="success", result="ok", execution_time_ms=result.execution_time_ms
    )
    assert seen == [({"text": "héllo", "tags": ["a"]}, context)]


def test_handler_cannot_alter_the_callers_arguments() -> None:
    def handler(arguments: dict[str, Any], context: ToolContext) -> str:
        arguments["added"] = True
        return "ok"

    arguments: dict[str, Any] = {"text": "hi"}
    execute_tool(registry_of(make_tool(handler=handler)), "sample", arguments)

    assert arguments == {"text": "hi"}


def test_async_handler_result() -> None:
    async def handler(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        return {"doubled": arguments["n"] * 2}

    result = execute_tool(registry_of(make_tool(handler=handler)), "sample", {"n": 21})

    assert result.success and result.result == {"doubled": 42}


def test_async_handler_error_is_classified_like_a_sync_one() -> None:
    async def handler(arguments: dict[str, Any], context: ToolContext) -> None:
        raise ToolArgumentError("n must be even")

    result = execute_tool(registry_of(make_tool(handler=handler)), "sample", {})

    assert result.error == (
        "Error executing tool 'sample': n must be even. Please check the arguments and try again."
    )
    assert result.retryable_by_model


def test_output_text_passes_strings_through() -> None:
    result = ToolResult(tool_name="t", status="success", result='already "text"\n')
    assert result.output_text() == 'already "text"\n'


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"city": "Zürich", "temps": [1, 2.5]}, '{"city":"Zürich","temps":[1,2.5]}'),
        ([1, "two"], '[1,"two"]'),
        (42, "42"),
        (None, "null"),
        (True, "true"),
    ],
)
def test_output_text_renders_other_results_as_compact_json(value: Any, text: str) -> None:
    assert ToolResult(tool_name="t", status="success", result=value).output_text() == text


def test_as_dict_for_success_and_error() -> None:
    ok = ToolResult(tool_name="t", status="success", result={"a": 1}, execution_time_ms=12)
    failed = ToolResult(tool_name="t", status="timeout", error="Error: slow", execution_time_ms=40)

    assert ok.as_dict() == {"success": True, "result": {"a": 1}, "tool_name": "t", "execution_time_ms": 12}
    assert failed.as_dict() == {
        "success": False,
        "error": "Error: slow",
        "tool_name": "t",
        "execution_time_ms": 40,
    }


def test_arguments_and_outputs_stay_out_of_logs(caplog: pytest.LogCaptureFixture) -> None:
    secret_in = "s3cret-argument"
    secret_out = "s3cret-output"

    def handler(arguments: dict[str, Any], context: ToolContext) -> str:
        raise ValueError(secret_out)

    registry = registry_of(make_tool(handler=handler), make_tool(name="ok", handler=return_arguments))
    with caplog.at_level(logging.INFO, logger="tools"):
        execute_tool(registry, "sample", {"password": secret_in})
        execute_tool(registry, "ok", {"password": secret_in})
        execute_tool(registry, "sample", '{"password": "' + secret_in)

    assert caplog.records, "the executor should log each call"
    for record in caplog.records:
        assert secret_in not in record.getMessage()
        assert secret_out not in record.getMessage()
    finished = [r for r in caplog.records if r.getMessage().startswith("Tool ok finished")]
    assert finished and finished[0].levelno == logging.INFO
    assert "status=success" in finished[0].getMessage()


def test_every_secret_a_call_was_handed_is_scrubbed_from_its_result_error_and_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One mechanism for all tools: whatever a tool returns or raises passes
    through the executor's scrubbing of the secrets it was handed (the user's
    through ``context.secret``, others through ``context.uses_secret``)."""
    user_key, operator_key = "user-key-0123456789", "op/key with spaces+&"

    def leaky(arguments: dict, context: ToolContext) -> dict:
        mine = context.secret("api_key")
        theirs = context.uses_secret(operator_key)
        if arguments["fail"] == "error":
            raise ToolError(f"upstream said: bad key {mine}")
        if arguments["fail"] == "bug":
            raise RuntimeError(f"crashed holding {theirs}")
        return {"echo": f"{mine} / {quote(theirs, safe='')}", mine: [theirs]}

    tool = Tool(name="leaky", description="Echoes its keys.", handler=leaky, parameters={
        "type": "object", "properties": {"fail": {"type": "string"}}, "required": ["fail"]})
    registry = registry_of(tool)

    def call(fail: str) -> ToolResult:
        context = ToolContext(user_id=1, secret_lookup={"api_key": user_key}.get)
        return execute_tool(registry, "leaky", {"fail": fail}, context=context)

    with caplog.at_level(logging.DEBUG):
        ok, error, bug = call("no"), call("error"), call("bug")

    assert ok.result == {"echo": "[redacted] / [redacted]", "[redacted]": ["[redacted]"]}
    assert "upstream said: bad key [redacted]" in error.error
    assert "crashed holding [redacted]" in bug.error
    for text in (json.dumps([r.as_dict() for r in (ok, error, bug)]), caplog.text):
        assert user_key not in text and operator_key not in text and quote(operator_key, safe="") not in text
