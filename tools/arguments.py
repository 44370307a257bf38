"""Turning the model's raw tool arguments into a validated dict.

Every rejection here is the model's mistake and carries the text that tells it
how to fix the call, so the executor can hand it back unchanged.

Arguments are checked against the *strict view* of a tool's schema
(``strict_schema``): an object schema that declares ``properties`` and says
nothing about other properties refuses them. JSON Schema's default is to allow
them, which would let a misspelt optional argument (``"timezon"``) pass
silently and be ignored; refusing it tells the model what it got wrong.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jsonschema.exceptions import WEAK_MATCHES, ValidationError, best_match

from tools import messages
from tools.files import FileAccess, file_id_arguments, no_file_access, no_such_file

if TYPE_CHECKING:  # tools.base builds its validator with strict_schema from here
    from tools.base import Tool

# Enough to fix a call in one go without flooding the model's context.
MAX_REPORTED_PROBLEMS = 5


class RejectedArguments(Exception):
    """The arguments cannot be passed to the handler; ``str(exc)`` is the model-facing text."""


class FilesUnavailable(Exception):
    """The tool takes file ids but the call belongs to no conversation (a tool
    run by hand, say): final, not the model's to fix; ``str(exc)`` says so."""


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


def check_file_arguments(tool: Tool, arguments: dict[str, Any], files: FileAccess | None) -> None:
    """Every argument the schema declares a file id (``{"type": "string",
    "format": "file-id"}``, at the top level or as the items of a top-level
    array) must name a file of the call's conversation; the model is told
    which do not, and where to look. Asks ``files`` once per id given."""
    named = list(file_id_arguments(tool.parameters, arguments))
    if not named:
        return
    if files is None:
        raise FilesUnavailable(f"Error executing tool '{tool.name}': {no_file_access(tool.name)}")
    problems = [f"{path}: {no_such_file(value).removesuffix('.')}" for path, value in named
                if files.info(value) is None]
    if problems:
        raise RejectedArguments(messages.invalid_arguments(tool.name, problems[:MAX_REPORTED_PROBLEMS]))


# Keywords that already say what happens to undeclared properties: such a
# schema keeps its own rule.
_OPENNESS_KEYWORDS = ("additionalProperties", "patternProperties", "unevaluatedProperties")
# Subschemas that describe *other* values (property values, array items, reusable
# definitions): each is a whole object schema in its own right.
_CHILD_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")
_CHILD_SCHEMAS = ("items", "additionalProperties", "unevaluatedProperties", "contains", "unevaluatedItems")
# Subschemas applied in place to the *same* value. allOf branches and
# dependentSchemas are always fragments of a larger object; anyOf/oneOf/then/else
# branches are alternatives of a whole object unless the schema declares
# properties of its own next to them.
_FRAGMENT_LISTS = ("allOf",)
_FRAGMENT_MAPS = ("dependentSchemas",)
_ALTERNATIVE_LISTS = ("anyOf", "oneOf")
_ALTERNATIVES = ("then", "else")
# Next to these, properties may be declared elsewhere, which only
# unevaluatedProperties (not additionalProperties) can see.
_IN_PLACE_KEYWORDS = ("$ref", "$dynamicRef", "allOf", "anyOf", "oneOf", "if", "dependentSchemas")


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` in which undeclared properties are refused unless allowed.

    Every object schema that declares ``properties`` and has none of
    ``additionalProperties``, ``patternProperties`` or ``unevaluatedProperties``
    gets ``additionalProperties: false`` - or ``unevaluatedProperties: false``
    when ``$ref``/``allOf``/``anyOf``/``oneOf``/``if``/``dependentSchemas``
    next to it may declare more properties, since only that keyword sees them.
    Fragments that describe part of an object (allOf branches, and anyOf/oneOf/
    then/else branches beside the object's own ``properties``) are not closed
    themselves, or they would refuse their siblings' properties. ``not`` and
    ``if`` are left as they are: tightening them would loosen the schema.
    Limitation: a ``$ref`` target is closed as a whole schema, so a schema
    extending it with extra properties needs the target to say
    ``additionalProperties: true``.
    """
    # A deep copy first, so that no part of the result is shared with the input.
    return _tightened(copy.deepcopy(schema), whole=True)


def _tightened(schema: Any, *, whole: bool) -> Any:
    """``schema`` (any JSON Schema value) with its object schemas closed; see ``strict_schema``."""
    if not isinstance(schema, Mapping):
        return schema  # true/false schemas
    result = dict(schema)
    declares = isinstance(result.get("properties"), Mapping)
    for key in _CHILD_SCHEMA_MAPS:
        _map_values(result, key, whole=True)
    for key in _CHILD_SCHEMAS:
        if key in result:
            result[key] = _tightened(result[key], whole=True)
    _map_items(result, "prefixItems", whole=True)
    for key in _FRAGMENT_LISTS:
        _map_items(result, key, whole=False)
    for key in _FRAGMENT_MAPS:
        _map_values(result, key, whole=False)
    for key in _ALTERNATIVE_LISTS:
        _map_items(result, key, whole=not declares)
    for key in _ALTERNATIVES:
        if key in result:
            result[key] = _tightened(result[key], whole=not declares)
    if whole and declares and not any(key in schema for key in _OPENNESS_KEYWORDS):
        in_place = any(key in schema for key in _IN_PLACE_KEYWORDS)
        result["unevaluatedProperties" if in_place else "additionalProperties"] = False
    return result


def _map_values(schema: dict[str, Any], key: str, *, whole: bool) -> None:
    if isinstance(schema.get(key), Mapping):
        schema[key] = {name: _tightened(value, whole=whole) for name, value in schema[key].items()}


def _map_items(schema: dict[str, Any], key: str, *, whole: bool) -> None:
    if isinstance(schema.get(key), list):
        schema[key] = [_tightened(value, whole=whole) for value in schema[key]]


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
