"""Bounded evaluation of arithmetic expressions written by a model.

``simpleeval`` does the evaluation (never ``eval``); on top of it:

* only arithmetic syntax is accepted - numbers, ``+ - * / // % **``, unary
  signs, parentheses and calls of a few math functions - checked on the parsed
  tree before anything runs, so attributes, strings, comparisons, lambdas and
  the like never reach the evaluator;
* every operation is size-checked *before* it computes. simpleeval's own
  ``MAX_POWER`` (4,000,000 for base and exponent) still lets
  ``4000000 ** 4000000`` through, a number of some 88 million bits that would
  take minutes; we instead refuse any integer result above ``MAX_INT_BITS``
  and any non-finite float, and estimate powers and products beforehand.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from simpleeval import InvalidExpression, SimpleEval

Number = int | float

# About 1,200 decimal digits: far more than any real calculation needs, small
# enough to compute instantly and to print (Python refuses to print ints
# beyond 4,300 digits by default).
MAX_INT_BITS = 4096
# round(x, n) with a large negative n builds 10**-n; this keeps that small.
MAX_ROUND_DIGITS = 100


_TOO_DEEP = "Expression is nested too deeply; simplify it or split it into several calculations"


class ExpressionError(ValueError):
    """The expression cannot be evaluated; the message says why, for the model."""


class ResultTooLarge(ExpressionError):
    """An intermediate or final value would exceed the size limits."""


def evaluate(expression: str) -> Number:
    """The value of ``expression`` (an int or a float), or ``ExpressionError``."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"Invalid syntax in expression: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise ExpressionError(_TOO_DEEP) from None
    _check_syntax(tree)
    evaluator = SimpleEval(operators=dict(_OPERATORS), functions=dict(FUNCTIONS), names=dict(CONSTANTS))
    try:
        value = evaluator.eval(expression, previously_parsed=tree.body)
    except ExpressionError:
        raise  # already says what is wrong (raised by our operators and functions)
    except RecursionError:
        # The evaluator recurses per node: "------1" nests 6 deep.
        raise ExpressionError(_TOO_DEEP) from None
    except ZeroDivisionError:
        raise ExpressionError("Division by zero") from None
    except OverflowError:
        raise ResultTooLarge("Result too large") from None
    except InvalidExpression as exc:
        raise ExpressionError(str(exc)) from None
    except (TypeError, ValueError) as exc:
        # e.g. sqrt(-1) ("math domain error"), min() with no arguments.
        raise ExpressionError(f"Cannot evaluate expression: {exc}") from None
    return _checked(value)


# --- what is allowed -------------------------------------------------------

CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}


def _round(number: Number, ndigits: int | None = None) -> Number:
    if ndigits is not None and abs(ndigits) > MAX_ROUND_DIGITS:
        raise ExpressionError(f"round() accepts at most {MAX_ROUND_DIGITS} digits")
    return round(number, ndigits)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "log": math.log,
    "exp": math.exp,
    "abs": abs,
    "round": _round,
    "min": min,
    "max": max,
    "floor": math.floor,
    "ceil": math.ceil,
}

_ALLOWED_NODES: tuple[type[ast.AST], ...] = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.Call,
    ast.keyword,
    ast.Name,
    ast.Load,
    ast.Constant,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.Mod,
    ast.Pow,
    ast.UAdd,
    ast.USub,
)


def _check_syntax(tree: ast.Expression) -> None:
    """Refuse anything but arithmetic before evaluating, with a message that says what."""
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise ExpressionError(
                f"Unsupported syntax: {type(node).__name__}. Use numbers, + - * / // % **, "
                f"parentheses, the constants {', '.join(CONSTANTS)} and the functions "
                f"{', '.join(FUNCTIONS)}"
            )
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise ExpressionError(f"Unsupported value {node.value!r}: only numbers are allowed")
            if isinstance(node.value, float) and not math.isfinite(node.value):
                raise ResultTooLarge("Number too large")
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS
        ):
            called = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
            raise ExpressionError(
                f"Unknown function '{called}'; available functions: {', '.join(FUNCTIONS)}"
            )
        if isinstance(node, ast.Name) and node.id not in CONSTANTS and node.id not in FUNCTIONS:
            raise ExpressionError(
                f"Unknown name '{node.id}'; available constants: {', '.join(CONSTANTS)}, "
                f"functions: {', '.join(FUNCTIONS)}"
            )


# --- size-checked operators ------------------------------------------------


def _number(value: Any) -> Number:
    """``value`` if it is a real number; functions used as values end up here."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ExpressionError(f"Expected a number, got {type(value).__name__}")
    return value


def _checked(value: Any) -> Number:
    """``value`` if it is a number within the size limits."""
    value = _number(value)
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ResultTooLarge(f"Result too large (more than {MAX_INT_BITS} bits)")
    if isinstance(value, float) and not math.isfinite(value):
        raise ResultTooLarge("Result too large for a floating-point number")
    return value


def _power(base: Any, exponent: Any) -> Number:
    """``base ** exponent``, refused up front when an integer result would be too large.

    ``(bit_length - 1) * exponent`` is a lower bound on the result's size, so
    anything computed is at most about twice the limit - instant.
    """
    base, exponent = _number(base), _number(exponent)
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0:
        if (abs(base).bit_length() - 1) * exponent > MAX_INT_BITS:
            raise ResultTooLarge(f"Result too large: {base} ** {exponent}")
    result = base**exponent
    if isinstance(result, complex):
        raise ExpressionError("The result is not a real number (fractional power of a negative number)")
    return _checked(result)


def _multiply(left: Any, right: Any) -> Number:
    """``left * right``, refused up front when an integer product would be too large."""
    left, right = _number(left), _number(right)
    if isinstance(left, int) and isinstance(right, int):
        if abs(left).bit_length() + abs(right).bit_length() > MAX_INT_BITS + 1:
            raise ResultTooLarge("Result too large")
    return _checked(left * right)


def _binary(function: Callable[[Number, Number], Number]) -> Callable[[Any, Any], Number]:
    """An operation whose result can only grow by a bit or so, checked afterwards."""

    def apply(left: Any, right: Any) -> Number:
        return _checked(function(_number(left), _number(right)))

    return apply


def _unary(function: Callable[[Number], Number]) -> Callable[[Any], Number]:
    def apply(operand: Any) -> Number:
        return _checked(function(_number(operand)))

    return apply


_OPERATORS: dict[type[ast.AST], Callable[..., Number]] = {
    ast.Add: _binary(operator.add),
    ast.Sub: _binary(operator.sub),
    ast.Mult: _multiply,
    ast.Div: _binary(operator.truediv),
    ast.FloorDiv: _binary(operator.floordiv),
    ast.Mod: _binary(operator.mod),
    ast.Pow: _power,
    ast.USub: _unary(operator.neg),
    ast.UAdd: _unary(operator.pos),
}
