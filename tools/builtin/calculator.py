"""The ``calculator`` tool: exact arithmetic, so the model does not guess at sums."""

from __future__ import annotations

from typing import Any

from tools.base import Tool, ToolContext, ToolPolicy
from tools.builtin.expression import CONSTANTS, FUNCTIONS, ExpressionError, Number, evaluate
from tools.errors import ToolArgumentError

MAX_EXPRESSION_LENGTH = 500
# Enough precision for any answer a user reads, while hiding float noise such
# as 0.1 + 0.2 == 0.30000000000000004.
SIGNIFICANT_DIGITS = 12


def calculate(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    """Evaluate ``arguments["expression"]``; any problem is the model's to fix."""
    expression: str = arguments["expression"]
    try:
        value = evaluate(expression)
    except ExpressionError as exc:
        raise ToolArgumentError(str(exc)) from None
    return {"expression": expression, "result": _presentable(value)}


def _presentable(value: Number) -> Number:
    """Integers stay exact; floats are rounded to ``SIGNIFICANT_DIGITS``."""
    if isinstance(value, int):
        return value
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}") + 0.0  # + 0.0 turns -0.0 into 0.0


CALCULATOR = Tool(
    name="calculator",
    description=(
        "Evaluate an arithmetic expression exactly. Supports numbers, + - * / // % ** "
        "(power), unary minus, parentheses, the constants "
        f"{', '.join(CONSTANTS)} and the functions {', '.join(FUNCTIONS)}. "
        "Use it instead of doing arithmetic in your head."
    ),
    parameters={
        "type": "object",
        "properties": {
            "expression": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_EXPRESSION_LENGTH,
                "description": "The expression, e.g. \"(2 + 3) * sqrt(16) / 7\".",
            }
        },
        "required": ["expression"],
        "additionalProperties": False,
    },
    handler=calculate,
    policy=ToolPolicy(timeout_s=5.0, side_effects="read_only"),
)
