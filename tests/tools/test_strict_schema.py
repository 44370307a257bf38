"""The strict view of a schema: undeclared properties are refused unless the schema allows them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.tools.factories import make_tool
from tools.arguments import RejectedArguments, strict_schema, validate_arguments

CITY = {"type": "object", "properties": {"city": {"type": "string"}}}


def _accepts(parameters: dict[str, Any], arguments: dict[str, Any]) -> bool:
    try:
        validate_arguments(make_tool(parameters=parameters), arguments)
    except RejectedArguments:
        return False
    return True


@pytest.mark.parametrize(
    ("parameters", "arguments", "accepted"),
    [
        pytest.param(CITY, {"city": "Oslo"}, True, id="declared"),
        pytest.param(CITY, {"city": "Oslo", "extra": 1}, False, id="undeclared-refused"),
        pytest.param({**CITY, "additionalProperties": True}, {"extra": 1}, True, id="explicitly-open"),
        pytest.param(
            {**CITY, "additionalProperties": {"type": "integer"}}, {"extra": 1}, True, id="typed-extras"
        ),
        pytest.param({**CITY, "patternProperties": {"^x_": {}}}, {"x_a": 1}, True, id="pattern-props"),
        pytest.param({**CITY, "unevaluatedProperties": True}, {"extra": 1}, True, id="unevaluated-open"),
        pytest.param({"type": "object"}, {"anything": 1}, True, id="no-properties-stays-open"),
        pytest.param(
            {"type": "object", "properties": {"p": CITY}}, {"p": {"city": "x", "zip": 1}}, False, id="nested"
        ),
        pytest.param(
            {"type": "object", "properties": {"l": {"type": "array", "items": CITY}}},
            {"l": [{"city": "x", "zip": 1}]},
            False,
            id="array-items",
        ),
        pytest.param(
            {"type": "object", "properties": {"p": {"$ref": "#/$defs/City"}}, "$defs": {"City": CITY}},
            {"p": {"city": "x", "zip": 1}},
            False,
            id="defs",
        ),
        pytest.param(
            {
                "type": "object",
                "allOf": [CITY, {"properties": {"zip": {"type": "string"}}}],
            },
            {"city": "x", "zip": "1"},
            True,
            id="allOf-branches-are-fragments",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {"kind": {"type": "string"}},
                "anyOf": [CITY, {"properties": {"zip": {"type": "string"}}}],
            },
            {"kind": "a", "zip": "1"},
            True,
            id="anyOf-beside-properties",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {"kind": {"type": "string"}},
                "anyOf": [CITY, {"properties": {"zip": {"type": "string"}}}],
            },
            {"kind": "a", "zip": "1", "other": 2},
            False,
            id="anyOf-beside-properties-still-closed",
        ),
        pytest.param(
            {"type": "object", "anyOf": [CITY, {"properties": {"zip": {"type": "string"}}}]},
            {"city": "x", "zip": "1"},
            False,
            id="anyOf-alternatives-closed",
        ),
        pytest.param(
            {"type": "object", "properties": {"v": {"not": CITY}}},
            {"v": {"city": "x", "other": 1}},
            False,
            id="not-left-alone",
        ),
    ],
)
def test_undeclared_properties(parameters: dict[str, Any], arguments: dict[str, Any], accepted: bool) -> None:
    assert _accepts(parameters, arguments) is accepted


def test_message_names_the_unexpected_property() -> None:
    with pytest.raises(RejectedArguments) as caught:
        validate_arguments(make_tool(name="weather", parameters=CITY), {"city": "Oslo", "cty": "x"})
    assert "'cty' was unexpected" in str(caught.value)
    assert "Invalid arguments for tool 'weather'" in str(caught.value)


def test_schema_with_sibling_ref_closes_with_unevaluated_properties() -> None:
    schema = {"type": "object", "$ref": "#/$defs/Base", "properties": {"b": {}}}
    assert strict_schema(schema)["unevaluatedProperties"] is False
    assert "additionalProperties" not in strict_schema(schema)


def test_input_is_not_mutated_nor_shared() -> None:
    schema = {"type": "object", "properties": {"p": CITY, "v": {"not": CITY}}}
    original = copy.deepcopy(schema)
    strict = strict_schema(schema)
    strict["properties"]["v"]["not"]["x"] = 1
    assert schema == original


def test_provider_spec_keeps_the_schema_as_written() -> None:
    tool = make_tool(parameters=CITY)
    assert "additionalProperties" not in tool.spec()["function"]["parameters"]
    assert tool.validator is tool.validator  # built once


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("uri", "https://example.com/a?b=1", "not a uri"),
        ("email", "a@example.com", "nope"),
        ("date", "2024-02-29", "2024-02-30"),
        ("ipv4", "10.0.0.1", "10.0.0.300"),
        ("uuid", "12345678-1234-5678-1234-567812345678", "x"),
    ],
)
def test_formats_are_checked(fmt: str, good: str, bad: str) -> None:
    schema = {"type": "object", "properties": {"v": {"type": "string", "format": fmt}}}
    assert _accepts(schema, {"v": good})
    assert not _accepts(schema, {"v": bad})
