"""Tools in each provider's wire shape, from one place.

Provider adapters call these instead of reshaping specs themselves, so that
every rule about what a provider accepts lives - with its reason - in this
module. Each function takes registry ``Tool`` objects or their OpenAI-format
specs (``Tool.spec()`` / ``ToolRegistry.specs()``), returns new dicts and never
mutates its input. See docs/tools.md, "Provider formats".
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tools.base import Tool

ToolLike = Tool | Mapping[str, Any]


@dataclass(frozen=True)
class _Definition:
    """The provider-neutral parts of a tool, with a private copy of its schema."""

    name: str
    description: str
    parameters: dict[str, Any]


def to_openai(tools: Iterable[ToolLike]) -> list[dict[str, Any]]:
    """Chat Completions tools: ``{"type": "function", "function": {name, description, parameters}}``.

    Ollama (native ``/api/chat`` and ``/v1``) takes the same shape. ``strict``
    is left out (it defaults to false): strict mode would demand every property
    be required, and arguments are validated on our side anyway.
    """
    return [
        {
            "type": "function",
            "function": {"name": d.name, "description": d.description, "parameters": d.parameters},
        }
        for d in _definitions(tools)
    ]


def to_openai_responses(tools: Iterable[ToolLike]) -> list[dict[str, Any]]:
    """Responses API tools: flat ``{"type", "name", "description", "parameters", "strict"}``.

    ``strict`` is a required field there and is sent as ``false`` for the same
    reason as in ``to_openai``: our schemas have optional properties, which
    strict mode refuses, and the executor validates the arguments itself.
    """
    return [
        {
            "type": "function",
            "name": d.name,
            "description": d.description,
            "parameters": d.parameters,
            "strict": False,
        }
        for d in _definitions(tools)
    ]


def to_anthropic(tools: Iterable[ToolLike]) -> list[dict[str, Any]]:
    """Anthropic Messages tools: ``{"name", "description", "input_schema"}`` (full JSON Schema)."""
    return [
        {"name": d.name, "description": d.description, "input_schema": d.parameters}
        for d in _definitions(tools)
    ]


def to_gemini(tools: Iterable[ToolLike]) -> list[dict[str, Any]]:
    """Gemini tools: ``[{"functionDeclarations": [...]}]``, or ``[]`` when there are no tools.

    ``parameters`` is Gemini's OpenAPI-3 subset (``gemini_schema``). A tool
    without properties gets no ``parameters`` at all: Gemini answers 400
    ("properties: should be non-empty for OBJECT type") to an empty object.
    An empty ``tools`` list is returned as ``[]`` so callers can leave the
    field out; a declaration list with nothing in it is not a valid tool.
    """
    declarations: list[dict[str, Any]] = []
    for d in _definitions(tools):
        declaration: dict[str, Any] = {"name": d.name, "description": d.description}
        parameters = gemini_schema(d.parameters)
        if parameters.get("properties"):
            declaration["parameters"] = parameters
        declarations.append(declaration)
    return [{"functionDeclarations": declarations}] if declarations else []


# --- Gemini's schema subset -------------------------------------------------------

# The Schema fields Gemini's function declarations accept (python-genai
# ``types.Schema``; docs/tools.md, "Provider formats"). Any other key is an "Unknown name"
# 400, e.g. ``additionalProperties``, ``$schema``, ``$defs``, ``const``,
# ``oneOf``, ``allOf``, ``exclusiveMinimum``, ``multipleOf``, ``uniqueItems``.
_GEMINI_KEYS = frozenset(
    {
        "type", "format", "title", "description", "nullable", "enum", "default", "example",
        "items", "properties", "required", "propertyOrdering", "anyOf",
        "minimum", "maximum", "minItems", "maxItems", "minLength", "maxLength",
        "minProperties", "maxProperties", "pattern",
    }
)
# Formats Gemini accepts per type; others are refused with a 400 ("only 'enum'
# and 'date-time' are supported for STRING type") and are moved to the description.
_GEMINI_FORMATS: dict[str, frozenset[str]] = {
    "string": frozenset({"enum", "date-time"}),
    "number": frozenset({"float", "double"}),
    "integer": frozenset({"int32", "int64"}),
}


def gemini_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` (JSON Schema) reduced to what Gemini accepts, keeping its meaning where it can.

    Rules, each for a reason:

    * ``$ref`` to ``$defs``/``definitions`` is inlined: Gemini has no references.
      A recursive reference becomes ``{}`` (any value), as it cannot be inlined.
    * ``type: [X, "null"]``, a ``null`` in ``enum`` and an ``anyOf`` branch
      ``{"type": "null"}`` become ``nullable: true``: Gemini has no null type.
      Several non-null types become ``anyOf`` of one type each.
    * ``oneOf`` becomes ``anyOf`` (Gemini has only ``anyOf``); an ``anyOf`` left
      with one branch is merged into its parent. ``allOf`` branches are merged.
      These loosen the schema at most; the executor still validates arguments
      against the original.
    * ``const`` becomes a one-value ``enum``.
    * A nested object without ``properties`` (a ``dict[str, X]``) stays a bare
      ``{"type": "object"}``; Gemini may refuse it as it does an empty top level
      (unconfirmed). Such tools can use ``parametersJsonSchema`` instead.
    * ``enum`` is kept only when all values are strings (Gemini's enum is
      string-only); other values are listed in the description instead.
    * ``format`` values Gemini does not support for the type move to the description.
    * ``required`` keeps only names that ``properties`` declares.
    * Every key outside Gemini's Schema is dropped (``additionalProperties``,
      ``$schema``, ``$defs``, ``patternProperties``, ``exclusiveMinimum`` ...).
    """
    source = copy.deepcopy(dict(schema))
    definitions = {**source.get("definitions", {}), **source.get("$defs", {})}
    return _gemini(source, definitions, ())


def _gemini(schema: Any, definitions: Mapping[str, Any], refs: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(schema, Mapping):
        return {}  # a true/false schema: Gemini cannot say "anything" or "nothing"
    if "$ref" in schema:
        return _gemini_ref(schema, definitions, refs)
    schema = dict(schema)
    if "allOf" in schema:
        schema = _merged(schema, schema.pop("allOf"))
    if "const" in schema:
        schema.setdefault("enum", [schema.pop("const")])
    result: dict[str, Any] = {}
    nullable = _gemini_type(schema, result)
    nullable |= _gemini_alternatives(schema, result, definitions, refs)
    nullable |= _gemini_enum(schema, result)
    for key, value in schema.items():
        if key in result or key not in _GEMINI_KEYS or key in ("type", "anyOf", "enum", "nullable"):
            continue
        if key == "properties" and isinstance(value, Mapping):
            result[key] = {name: _gemini(sub, definitions, refs) for name, sub in value.items()}
        elif key == "items":
            result[key] = _gemini(value, definitions, refs)
        else:
            result[key] = value
    _gemini_format(result)
    if "required" in result:
        declared = result.get("properties", {})
        result["required"] = [name for name in result["required"] if name in declared]
        if not result["required"]:
            del result["required"]
    if nullable or schema.get("nullable") is True:
        result["nullable"] = True
    return result


def _gemini_ref(
    schema: Mapping[str, Any], definitions: Mapping[str, Any], refs: tuple[str, ...]
) -> dict[str, Any]:
    """The referenced definition, inlined, with the referring schema's own keywords on top."""
    ref = schema["$ref"]
    name = ref.rsplit("/", 1)[-1] if isinstance(ref, str) else ""
    local = isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/"))
    target = definitions.get(name) if local else None
    if target is None or ref in refs:
        return {}  # unknown or recursive: nothing Gemini could express
    siblings = {key: value for key, value in schema.items() if key != "$ref"}
    base = dict(target) if isinstance(target, Mapping) else {}
    return _gemini({**base, **siblings}, definitions, (*refs, ref))


def _gemini_type(schema: Mapping[str, Any], result: dict[str, Any]) -> bool:
    """Copy ``type``, turning ``"null"`` members into ``nullable``; True if null was allowed."""
    kind = schema.get("type")
    if not isinstance(kind, list):
        if kind == "null":
            return True
        if kind is not None:
            result["type"] = kind
        return False
    others = [member for member in kind if member != "null"]
    if len(others) == 1:
        result["type"] = others[0]
    elif others:
        result["anyOf"] = [{"type": member} for member in others]
    return len(others) < len(kind)


def _gemini_alternatives(
    schema: Mapping[str, Any], result: dict[str, Any], definitions: Mapping[str, Any], refs: tuple[str, ...]
) -> bool:
    """``anyOf``/``oneOf`` as ``anyOf`` without null branches; one branch is merged in."""
    branches = [*schema.get("anyOf", []), *schema.get("oneOf", [])]
    if not branches:
        return False
    converted = [_gemini(branch, definitions, refs) for branch in branches]
    nullable = any(branch.get("nullable") is True and set(branch) == {"nullable"} for branch in converted)
    kept = [branch for branch in converted if set(branch) != {"nullable"}]
    if len(kept) == 1:
        for key, value in kept[0].items():
            result.setdefault(key, value)
    elif kept:
        result["anyOf"] = kept
    return nullable


def _gemini_enum(schema: Mapping[str, Any], result: dict[str, Any]) -> bool:
    """Keep a string-only ``enum``; list other values in the description. True if null was allowed."""
    values = schema.get("enum")
    if not isinstance(values, list):
        return False
    present = [value for value in values if value is not None]
    if all(isinstance(value, str) for value in present):
        result["enum"] = present
        result.setdefault("type", "string")  # Gemini's enum belongs to the STRING type
    else:
        listed = ", ".join(_plain(value) for value in present)
        _describe(result, schema, f"Allowed values: {listed}.")
    return len(present) < len(values)


def _gemini_format(result: dict[str, Any]) -> None:
    """Move a ``format`` Gemini does not support for the type into the description."""
    fmt = result.get("format")
    if fmt is None:
        return
    if fmt not in _GEMINI_FORMATS.get(result.get("type", ""), frozenset()):
        del result["format"]
        _describe(result, result, f"Format: {fmt}.")


def _describe(result: dict[str, Any], schema: Mapping[str, Any], note: str) -> None:
    description = result.get("description", schema.get("description"))
    result["description"] = f"{description} {note}" if description else note


def _merged(schema: dict[str, Any], branches: Any) -> dict[str, Any]:
    """``schema`` with its ``allOf`` branches folded in: properties and required united, else first wins."""
    merged = dict(schema)
    for branch in branches if isinstance(branches, list) else []:
        if not isinstance(branch, Mapping):
            continue
        for key, value in branch.items():
            if key == "properties" and isinstance(value, Mapping):
                merged["properties"] = {**value, **merged.get("properties", {})}
            elif key == "required" and isinstance(value, list):
                known = merged.get("required", [])
                merged["required"] = [*known, *(name for name in value if name not in known)]
            else:
                merged.setdefault(key, value)
    return merged


def _plain(value: Any) -> str:
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


# --- input ---------------------------------------------------------------------------


def _definitions(tools: Iterable[ToolLike]) -> list[_Definition]:
    return [_definition(item) for item in tools]


def _definition(item: ToolLike) -> _Definition:
    """Name, description and a copy of the parameters of a ``Tool`` or an OpenAI-format spec."""
    if isinstance(item, Tool):
        return _Definition(item.name, item.description, copy.deepcopy(item.parameters))
    function = item.get("function") if isinstance(item, Mapping) else None
    if not isinstance(function, Mapping) or item.get("type") != "function" or "name" not in function:
        raise TypeError(
            "Expected a Tool or an OpenAI function spec "
            '{"type": "function", "function": {"name": ...}}, got ' + repr(item)[:200]
        )
    parameters = function.get("parameters") or {"type": "object", "properties": {}}
    return _Definition(function["name"], function.get("description", ""), copy.deepcopy(dict(parameters)))
