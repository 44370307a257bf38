"""Turning the model's raw tool arguments into a validated dict.

Every rejection here is the model's mistake and carries the text that tells it
how to fix the call, so the executor can hand it back unchanged.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema.exceptions import WEAK_MATCHES, ValidationError, best_match

from tools import messages
from tools.base import Tool

# Enough to fix a call in one go without flooding the model's context.
MAX_REPORTED_PROBLEMS = 5


class RejectedArguments(Exception):
    """The arguments cannot be passed to the handler; ``str(exc)`` is the model-facing text."""


def parse_arguments(raw: str | dict[str, Any] | None) -> dict[str, Any]:
    """The arguments as a dict: ``None`` or ``""`` mean no arguments, strings are JSON.

    Providers send arguments as a JSON string; tests and internal callers often
    pass a dict, which is returned as is (the executor copies it per attempt).
    """
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):
            raise RejectedArguments(messages.invalid_json(raw)) from None
        shown = raw
    else:
        value = raw
        shown = _show(raw)
    if not isinstance(value, dict):
        raise RejectedArguments(messages.arguments_not_an_object(_json_kind(value), shown))
    return value


def validate_arguments(tool: Tool, arguments: dict[str, Any]) -> None:
    """Check ``arguments`` against the tool's schema, reporting every problem, best first."""
    errors = sorted(tool.validator.iter_errors(arguments), key=_importance)
    if not errors:
        return
    problems = [_describe(error) for error in errors[:MAX_REPORTED_PROBLEMS]]
    if len(errors) > MAX_REPORTED_PROBLEMS:
        problems.append(f"and {len(errors) - MAX_REPORTED_PROBLEMS} more problems")
    raise RejectedArguments(messages.invalid_arguments(tool.name, problems))


def _importance(error: ValidationError) -> tuple[int, bool]:
    """Sort key, best first: as in ``best_match``, errors higher up in the arguments
    and not from anyOf/oneOf come first; ties keep the schema's order, which reads
    more naturally than ``relevance``'s reverse path order."""
    return (len(error.path), error.validator in WEAK_MATCHES)


def _describe(error: ValidationError) -> str:
    """``<json path>: <message>`` for the most specific cause of ``error``.

    For anyOf/oneOf failures ``best_match`` digs into the branch that came
    closest, which says far more than "is not valid under any of the given schemas".
    """
    cause = best_match([error])
    return messages.clip(f"{cause.json_path}: {cause.message}", messages.MAX_PROBLEM_CHARS)


def _show(value: object) -> str:
    """A compact JSON rendering of a non-string argument value for error texts."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return repr(value)


def _json_kind(value: object) -> str:
    """The JSON name of a value's type, as the model thinks of it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    return f"a {type(value).__name__}"
