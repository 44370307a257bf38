from __future__ import annotations

import pytest

from tools.base import Tool, ToolContext, ToolPolicy
from tests.tools.factories import make_tool, return_arguments


@pytest.mark.parametrize("name", ["a", "get_time", "web-search", "X9", "a" * 64])
def test_valid_names_are_accepted(name: str) -> None:
    assert make_tool(name=name).name == name


@pytest.mark.parametrize("name", ["", "a" * 65, "has space", "dotted.name", "émoji", "semi;colon"])
def test_invalid_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="Invalid tool name"):
        make_tool(name=name)


@pytest.mark.parametrize(
    ("parameters", "match"),
    [
        ({"type": "object", "properties": {"x": {"type": "strin"}}}, "invalid parameters schema"),
        ({"type": "object", "required": "x"}, "invalid parameters schema"),
        ({"type": "array", "items": {"type": "string"}}, 'must have "type": "object"'),
        ({"properties": {}}, 'must have "type": "object"'),
    ],
)
def test_invalid_parameter_schemas_are_refused_at_construction(parameters: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make_tool(parameters=parameters)


def test_parameters_must_be_a_dict() -> None:
    with pytest.raises(TypeError, match="parameters must be a dict"):
        make_tool(parameters="{}")  # type: ignore[arg-type]


def test_description_is_required() -> None:
    with pytest.raises(ValueError, match="non-empty description"):
        Tool(name="t", description="  ", parameters={"type": "object"}, handler=return_arguments)


def test_handler_must_be_callable() -> None:
    with pytest.raises(TypeError, match="handler must be callable"):
        Tool(
            name="t", description="d", parameters={"type": "object"}, handler="nope"  # type: ignore[arg-type]
        )


def test_spec_is_openai_function_format() -> None:
    parameters = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    tool = make_tool(name="search", parameters=parameters)

    assert tool.spec() == {
        "type": "function",
        "function": {"name": "search", "description": "Test tool search.", "parameters": parameters},
    }


def test_tool_owns_its_schema() -> None:
    parameters = {"type": "object", "properties": {}}
    tool = make_tool(parameters=parameters)

    parameters["properties"]["added"] = {"type": "string"}
    tool.spec()["function"]["parameters"]["properties"]["also_added"] = {}

    assert tool.parameters == {"type": "object", "properties": {}}


def test_tools_are_hashable() -> None:
    tool = make_tool()
    assert tool in {tool}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"timeout_s": 0},
        {"timeout_s": -1},
        {"max_attempts": 0},
        {"backoff_initial_s": -0.1},
        {"backoff_max_s": -1},
        {"side_effects": "sometimes"},
        {"pool": "gevent"},
    ],
)
def test_policy_refuses_nonsense(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        ToolPolicy(**kwargs)


def test_policy_defaults() -> None:
    policy = ToolPolicy()
    assert (policy.timeout_s, policy.max_attempts, policy.side_effects, policy.requires_approval, policy.pool) == (
        10.0,
        1,
        "read_only",
        False,
        "process",  # the prefork pool, under its hard time limit, unless a tool asks for "io"
    )


@pytest.mark.parametrize(
    ("context", "key"),
    [
        (ToolContext(run_id="r1", tool_call_id="call_1"), "r1:call_1"),
        (ToolContext(run_id="r1"), None),
        (ToolContext(tool_call_id="call_1"), None),
        (ToolContext(), None),
    ],
)
def test_idempotency_key_needs_run_and_call(context: ToolContext, key: str | None) -> None:
    assert context.idempotency_key == key
