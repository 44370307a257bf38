from __future__ import annotations

from typing import Any

import pytest

from tools.builtin.calculator import CALCULATOR
from tools.builtin.expression import MAX_INT_BITS
from tools.executor import ToolResult, execute_tool
from tests.tools.factories import registry_of


def calculate(expression: Any) -> ToolResult:
    return execute_tool(registry_of(CALCULATOR), "calculator", {"expression": expression})


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("-7 // 2", -4),
        ("7 % 3", 1),
        ("2 ** 10", 1024),
        ("-3 + +2", -1),
        ("2 ** -1", 0.5),
        ("0.1 + 0.2", 0.3),
        ("1 / 3", 0.333333333333),
        ("sqrt(16)", 4.0),
        ("sqrt(2)", 1.41421356237),
        ("abs(-5)", 5),
        ("round(2.567, 2)", 2.57),
        ("round(2.5)", 2),
        ("min(3, 1, 2) + max(3, 1, 2)", 4),
        ("floor(2.7) + ceil(2.1)", 5),
        ("log(8, 2)", 3.0),
        ("log(e)", 1.0),
        ("exp(0)", 1.0),
        ("sin(pi / 2)", 1.0),
        ("cos(0) + tan(0)", 1.0),
        ("2 * pi", 6.28318530718),
        ("-0.0", 0.0),
        ("12345678901234567890 * 98765432109876543210", 1219326311370217952237463801111263526900),
    ],
)
def test_evaluates(expression: str, value: int | float) -> None:
    result = calculate(expression)

    assert result.success, result.error
    assert result.result == {"expression": expression, "result": value}
    assert type(result.result["result"]) is type(value)


def test_division_by_zero() -> None:
    for expression in ("1 / 0", "1 // 0", "1 % 0", "0 ** -1"):
        result = calculate(expression)
        assert result.error == (
            "Error executing tool 'calculator': Division by zero. Please check the arguments and try again."
        )
        assert result.retryable_by_model


@pytest.mark.parametrize(
    "expression",
    ["9**9**9", "4000000 ** 4000000", "2 ** 5000", "10**1000 * 10**1000", "(10**600)**2 * 10**600"],
)
def test_huge_integers_are_refused(expression: str) -> None:
    result = calculate(expression)

    assert result.status == "error"
    assert result.error is not None and "Result too large" in result.error
    assert result.retryable_by_model


def test_integers_up_to_the_limit_are_exact() -> None:
    result = calculate(f"2 ** {MAX_INT_BITS - 1}")

    assert result.success
    assert result.result["result"] == 2 ** (MAX_INT_BITS - 1)
    assert str(2 ** (MAX_INT_BITS - 1)) in result.output_text()


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1e308 * 10", "Result too large"),
        ("1e999", "Number too large"),
        ("10**400 / 3", "Result too large"),
        ("exp(1000)", "Result too large"),
        ("round(5, -10**9)", "round() accepts at most 100 digits"),
        ("sqrt(-1)", "math domain error"),
        ("log(0)", "math domain error"),
        ("(-8) ** (1/3)", "not a real number"),
        ("min()", "min expected at least 1 argument"),
        ("1 +", "Invalid syntax in expression"),
        ("1; 2", "Invalid syntax in expression"),
        ("__import__('os')", "Unknown function '__import__'"),
        ("factorial(5)", "Unknown function 'factorial'"),
        ("x + 1", "Unknown name 'x'"),
        ("(1).real", "Unsupported syntax: Attribute"),
        ("[1, 2]", "Unsupported syntax: List"),
        ("1 < 2", "Unsupported syntax: Compare"),
        ("lambda: 1", "Unsupported syntax: Lambda"),
        ("1 if 1 else 2", "Unsupported syntax: IfExp"),
        ("~1", "Unsupported syntax: Invert"),
        ("1 << 2", "Unsupported syntax: LShift"),
        ("'a' * 3", "Unsupported value 'a'"),
        ("True + 1", "Unsupported value True"),
        ("2j", "Unsupported value 2j"),
        ("sqrt + 1", "Expected a number"),
        ("sqrt", "Expected a number"),
        ("-" * 499 + "1", "nested too deeply"),
    ],
)
def test_refused_expressions_tell_the_model_why(expression: str, message: str) -> None:
    result = calculate(expression)

    assert result.status == "error"
    assert result.error is not None
    assert result.error.startswith("Error executing tool 'calculator': ")
    assert message in result.error
    assert result.error.endswith("Please check the arguments and try again.")
    assert result.retryable_by_model


@pytest.mark.parametrize("arguments", [{}, {"expression": ""}, {"expression": "1" * 501}, {"expression": 5}])
def test_schema_rejects_missing_empty_long_or_non_string_expressions(arguments: dict[str, Any]) -> None:
    result = execute_tool(registry_of(CALCULATOR), "calculator", arguments)

    assert result.error is not None
    assert result.error.startswith("Error: Invalid arguments for tool 'calculator': $")


def test_schema_forbids_extra_properties() -> None:
    assert CALCULATOR.parameters["additionalProperties"] is False
    assert CALCULATOR.policy.side_effects == "read_only"
