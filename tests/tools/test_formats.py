"""Tools in each provider's shape, from Tool objects or OpenAI specs, never mutating them."""

from __future__ import annotations

import copy
from typing import Any, Literal

import pytest

from tests.tools.factories import make_tool
from tools.decorators import tool
from tools.formats import gemini_schema, to_anthropic, to_gemini, to_openai, to_openai_responses

CITY = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "City."}},
    "required": ["city"],
    "additionalProperties": False,
}


def _tool() -> Any:
    return make_tool(name="weather", parameters=CITY)


@pytest.fixture(params=["tool", "spec"])
def weather(request: pytest.FixtureRequest) -> Any:
    """The same tool as a ``Tool`` and as its OpenAI spec: every converter takes both."""
    return _tool() if request.param == "tool" else _tool().spec()


def test_openai(weather: Any) -> None:
    assert to_openai([weather]) == [
        {
            "type": "function",
            "function": {"name": "weather", "description": "Test tool weather.", "parameters": CITY},
        }
    ]


def test_openai_responses(weather: Any) -> None:
    assert to_openai_responses([weather]) == [
        {
            "type": "function",
            "name": "weather",
            "description": "Test tool weather.",
            "parameters": CITY,
            "strict": False,
        }
    ]


def test_anthropic(weather: Any) -> None:
    assert to_anthropic([weather]) == [
        {"name": "weather", "description": "Test tool weather.", "input_schema": CITY}
    ]


def test_gemini(weather: Any) -> None:
    assert to_gemini([weather]) == [
        {
            "functionDeclarations": [
                {
                    "name": "weather",
                    "description": "Test tool weather.",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string", "description": "City."}},
                        "required": ["city"],
                    },
                }
            ]
        }
    ]


def test_gemini_without_properties_has_no_parameters() -> None:
    declarations = to_gemini([make_tool(name="now", parameters={"type": "object"})])
    assert declarations == [{"functionDeclarations": [{"name": "now", "description": "Test tool now."}]}]


def test_no_tools() -> None:
    assert (to_openai([]), to_openai_responses([]), to_anthropic([]), to_gemini([])) == ([], [], [], [])


@pytest.mark.parametrize("convert", [to_openai, to_openai_responses, to_anthropic, to_gemini])
def test_input_not_mutated_and_output_not_shared(convert: Any) -> None:
    tool = make_tool(name="weather", parameters=CITY)
    spec = tool.spec()
    before = copy.deepcopy(spec)
    for source in (tool, spec):
        output = convert([source])
        _scribble(output)
    assert spec == before
    assert tool.spec() == before


def _scribble(value: Any) -> None:
    """Change every dict in ``value``, to prove nothing is shared with the input."""
    if isinstance(value, dict):
        for item in list(value.values()):
            _scribble(item)
        value["scribbled"] = True
    elif isinstance(value, list):
        for item in value:
            _scribble(item)


def test_bad_input_refused() -> None:
    with pytest.raises(TypeError, match="OpenAI function spec"):
        to_openai([{"name": "flat"}])


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        pytest.param({"type": "string", "default": "x"}, {"type": "string", "default": "x"}, id="default-kept"),
        pytest.param(
            {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
             "properties": {"a": {"type": "string"}}, "additionalProperties": False},
            {"type": "object", "properties": {"a": {"type": "string"}}},
            id="dropped-keys",
        ),
        pytest.param({"type": ["string", "null"]}, {"type": "string", "nullable": True}, id="type-null"),
        pytest.param(
            {"type": ["string", "integer"]},
            {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            id="several-types",
        ),
        pytest.param(
            {"type": ["string", "null"], "enum": ["a", None]},
            {"type": "string", "enum": ["a"], "nullable": True},
            id="enum-null",
        ),
        pytest.param(
            {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}], "description": "N."},
            {"type": "integer", "minimum": 1, "description": "N.", "nullable": True},
            id="anyOf-null-merged",
        ),
        pytest.param(
            {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            id="oneOf-to-anyOf",
        ),
        pytest.param({"const": "x"}, {"type": "string", "enum": ["x"]}, id="const"),
        pytest.param(
            {"type": "integer", "enum": [1, 2], "description": "Level."},
            {"type": "integer", "description": "Level. Allowed values: 1, 2."},
            id="non-string-enum",
        ),
        pytest.param(
            {"type": "string", "format": "uri"},
            {"type": "string", "description": "Format: uri."},
            id="unsupported-format",
        ),
        pytest.param(
            {"type": "string", "format": "date-time"},
            {"type": "string", "format": "date-time"},
            id="supported-format",
        ),
        pytest.param(
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "ghost"]},
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            id="required-only-declared",
        ),
        pytest.param(
            {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "integer"}},
                                        "additionalProperties": False}, "uniqueItems": True},
            {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "integer"}}}},
            id="items",
        ),
        pytest.param(
            {"type": "object", "properties": {"p": {"$ref": "#/$defs/P", "description": "The P."}},
             "$defs": {"P": {"type": "object", "properties": {"x": {"type": "number"}}}}},
            {"type": "object", "properties": {"p": {"type": "object", "properties": {"x": {"type": "number"}},
                                                   "description": "The P."}}},
            id="ref-inlined",
        ),
        pytest.param(
            {"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}},
             "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}}},
            {"type": "object", "properties": {"n": {"type": "object", "properties": {"next": {}}}}},
            id="recursive-ref",
        ),
        pytest.param(
            {"type": "object", "allOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]},
                                         {"properties": {"b": {"type": "integer"}}}]},
            {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
             "required": ["a"]},
            id="allOf-merged",
        ),
    ],
)
def test_gemini_schema_rules(schema: dict[str, Any], expected: dict[str, Any]) -> None:
    before = copy.deepcopy(schema)
    assert gemini_schema(schema) == expected
    assert schema == before


def test_decorated_tool_converts_for_gemini() -> None:
    @tool
    def search(query: str, limit: int = 5, kind: Literal["web", "news"] | None = None) -> str:
        """Search."""
        return ""

    parameters = to_gemini([search])[0]["functionDeclarations"][0]["parameters"]
    assert parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "default": 5},
            "kind": {"type": "string", "enum": ["web", "news"], "default": None, "nullable": True},
        },
        "required": ["query"],
    }
