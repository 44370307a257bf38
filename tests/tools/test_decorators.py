"""``@tool``: schemas derived from typed signatures, and handlers that adapt the call."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NotRequired, Optional, TypedDict

import pytest

from tests.tools.factories import registry_of
from tools.base import Tool, ToolContext
from tools.decorators import function_tool, tool
from tools.executor import execute_tool


class Address(TypedDict):
    """A postal address.

    Attributes:
        street: Street and number.
    """

    street: str
    zip: NotRequired[str]


@dataclass
class Point:
    """A point on the plane."""

    x: float
    y: float = 0.0
    tags: list[str] = field(default_factory=list)
    label: str | None = None


@dataclass
class Node:
    children: list[Node]


def _schema_of(annotation: Any, **kwargs: Any) -> dict[str, Any]:
    """The property schema ``@tool`` derives for a parameter ``v: annotation``."""

    def f(v):  # type: ignore[no-untyped-def]
        """Test."""

    f.__annotations__ = {"v": annotation}
    return function_tool(f, **kwargs).parameters["properties"]["v"]


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (Literal["a", 1], {"enum": ["a", 1]}),
        (Literal["a", None], {"type": ["string", "null"], "enum": ["a", None]}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (dict[str, bool], {"type": "object", "additionalProperties": {"type": "boolean"}}),
        (str | None, {"type": ["string", "null"]}),
        (Optional[int], {"type": ["integer", "null"]}),
        (list[str] | None, {"type": ["array", "null"], "items": {"type": "string"}}),
        (Annotated[str, "The city."], {"type": "string", "description": "The city."}),
        (Annotated[str, 42, "desc"], {"type": "string", "description": "desc"}),
        (
            Address,
            {
                "type": "object",
                "description": "A postal address.",
                "properties": {
                    "street": {"type": "string", "description": "Street and number."},
                    "zip": {"type": "string"},
                },
                "required": ["street"],
                "additionalProperties": False,
            },
        ),
        (
            Point,
            {
                "type": "object",
                "description": "A point on the plane.",
                "properties": {
                    "x": {"type": "number"},
                    "y": {"type": "number", "default": 0.0},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "label": {"type": ["string", "null"], "default": None},
                },
                "required": ["x"],
                "additionalProperties": False,
            },
        ),
    ],
    ids=repr,
)
def test_property_schemas(annotation: Any, expected: dict[str, Any]) -> None:
    assert _schema_of(annotation) == expected


@pytest.mark.parametrize(
    ("annotation", "message"),
    [
        (Any, "unsupported type"),
        (list, "unsupported type"),
        (tuple[int, int], "unsupported type"),
        (set[str], "unsupported type"),
        (dict[int, str], r"only dict\[str, X\]"),
        (int | str, "only X | None"),
        (Literal[1.5], "Literal values"),
        (Node, "recursive type"),
        (bytes, "unsupported type"),
    ],
    ids=repr,
)
def test_unsupported_annotations_refused_at_decoration(annotation: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        _schema_of(annotation)


def test_full_tool_from_signature_and_docstring() -> None:
    @tool(timeout_s=3, max_attempts=2, side_effects="idempotent", requires_approval=True, pool="io")
    def city_population(
        city: Annotated[str, "The city's English name."],
        context: ToolContext,
        year: int | None = None,
        unit: Literal["people", "thousands"] = "people",
        note: str | None = None,
    ) -> dict[str, Any]:
        """Population of a city.

        Counted by the latest census.

        Args:
            city: Ignored: Annotated wins.
            year: Census year;
                the latest when omitted.
        """
        return {}

    assert isinstance(city_population, Tool)
    assert city_population.name == "city_population"
    assert city_population.description == "Population of a city."
    assert city_population.policy.timeout_s == 3
    assert city_population.policy.max_attempts == 2
    assert city_population.policy.side_effects == "idempotent"
    assert city_population.policy.requires_approval is True
    assert city_population.policy.pool == "io"
    assert city_population.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city's English name."},
            "year": {
                "type": ["integer", "null"],
                "description": "Census year; the latest when omitted.",
                "default": None,
            },
            "unit": {"type": "string", "enum": ["people", "thousands"], "default": "people"},
            "note": {"type": ["string", "null"], "default": None},
        },
        "required": ["city"],
        "additionalProperties": False,
    }


def test_bare_decorator_and_overrides() -> None:
    @tool
    def plain() -> str:
        """Say hi."""
        return "hi"

    @tool("renamed", "Given description.")
    def other() -> str:
        return "x"

    assert (plain.name, plain.description) == ("plain", "Say hi.")
    assert (other.name, other.description) == ("renamed", "Given description.")
    assert plain.parameters == {"type": "object", "properties": {}, "additionalProperties": False}


def test_sphinx_docstring() -> None:
    @tool
    def f(a: int) -> None:
        """Do it.

        :param a: The a.
        """

    assert f.parameters["properties"]["a"]["description"] == "The a."


@pytest.mark.parametrize(
    ("define", "message"),
    [
        (lambda: tool(lambda: None), "description"),
        (lambda: function_tool(_no_annotation), "needs a type annotation"),
        (lambda: function_tool(_star_args), r"\*args"),
        (lambda: function_tool(_two_contexts), "only one parameter"),
        (lambda: function_tool(_unresolvable), "cannot resolve"),
    ],
)
def test_bad_functions_refused(define: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        define()


def _no_annotation(a) -> None:  # type: ignore[no-untyped-def]
    """Doc."""


def _star_args(*values: int) -> None:
    """Doc."""


def _two_contexts(a: ToolContext, b: ToolContext) -> None:
    """Doc."""


def _unresolvable(a: DoesNotExist) -> None:  # type: ignore[name-defined]  # noqa: F821
    """Doc."""


@tool
def _describe_call(
    ctx: ToolContext,
    count: int,
    ratio: float,
    where: Address,
    point: Point | None,
    points: list[Point] = [],  # noqa: B006 - never mutated
    scale: float = 1.0,
) -> dict[str, Any]:
    """Report how the arguments arrived."""
    return {
        "run_id": ctx.run_id,
        "count": [type(count).__name__, count],
        "ratio": [type(ratio).__name__, ratio],
        "where": where,
        "point": dataclasses.asdict(point) if point else None,
        "points": [type(p).__name__ for p in points],
        "scale": scale,
    }


def test_handler_converts_arguments_and_passes_the_context() -> None:
    result = execute_tool(
        registry_of(_describe_call),
        "_describe_call",
        {"count": 3.0, "ratio": 2, "where": {"street": "Main 1"}, "points": [{"x": 1}]},
        context=ToolContext(run_id="run-1"),
    )
    assert result.success, result.error
    assert result.result == {
        "run_id": "run-1",
        "count": ["int", 3],
        "ratio": ["float", 2.0],
        "where": {"street": "Main 1"},
        "point": None,
        "points": ["Point"],
        "scale": 1.0,
    }


def test_nested_dataclass_built_with_its_defaults() -> None:
    result = execute_tool(
        registry_of(_describe_call),
        "_describe_call",
        {"count": 1, "ratio": 1.5, "where": {"street": "s"}, "point": {"x": 2}},
    )
    assert result.result["point"] == {"x": 2.0, "y": 0.0, "tags": [], "label": None}


def test_extra_nested_property_refused() -> None:
    result = execute_tool(
        registry_of(_describe_call),
        "_describe_call",
        {"count": 1, "ratio": 1.5, "where": {"street": "s", "city": "x"}, "point": None},
    )
    assert not result.success
    assert "'city' was unexpected" in (result.error or "")


def test_async_function() -> None:
    @tool
    async def wait(seconds: float) -> str:
        """Sleep a little."""
        await asyncio.sleep(seconds)
        return "done"

    assert asyncio.iscoroutinefunction(wait.handler)
    result = execute_tool(registry_of(wait), "wait", {"seconds": 0})
    assert (result.success, result.result) == (True, "done")


def test_handler_keeps_the_function_name_for_diagnostics() -> None:
    assert _describe_call.handler.__qualname__ == "_describe_call"
    assert _describe_call.handler.__module__ == __name__
