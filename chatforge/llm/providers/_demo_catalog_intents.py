"""How the demo model calls any other tool it is offered — an admin-made
data tool, say — so a new tool can be seen working in chat without a real
model. The rule is meant to be read by people (docs/tools.md, "Trying a
tool with the demo model"):

1. The tool is called when the message **names** it (``lookup_order``, or
   with ``_``/``-`` read as spaces: "lookup order"), or, failing that, when
   the message contains at least two words (5+ letters) of the tool's
   description.
2. Arguments come from the message: ``name=value`` or ``name: value`` for a
   parameter wins; otherwise a required string parameter takes a quoted
   text ("…"), else the words after the tool's name (the whole message when
   the description matched); an integer or number parameter
   takes the first number; a parameter with a ``default`` or ``enum`` takes
   that. Only the parameters the schema lists are sent, required ones
   first; a required one that cannot be filled is left out, and the tool's
   validation error reaches the answer, as with a real model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from chatforge.llm.providers._demo_intents import Intent

_WORD = re.compile(r"[A-Za-z]{5,}")
_QUOTED = re.compile(r"[\"“]([^\"”]+)[\"”]")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def catalog_intents(text: str, specs: Iterable[dict[str, Any]], *, skip: set[str]) -> list[Intent]:
    """A call for each offered tool (not in ``skip``) the text asks for."""
    intents: list[Intent] = []
    for spec in specs:
        function = spec.get("function") or {}
        name = str(function.get("name") or "")
        if not name or name in skip:
            continue
        position, rest = _mention(text, name, str(function.get("description") or ""))
        if position is None:
            continue
        intents.append(Intent(position, name, _arguments(text, rest, function.get("parameters") or {})))
    return intents


def _mention(text: str, name: str, description: str) -> tuple[int | None, str]:
    """Where the text asks for the tool, and the text after its name."""
    spoken = re.escape(name).replace("_", "[_ ]").replace(r"\-", "[- ]")
    named = re.search(rf"(?<![\w]){spoken}(?![\w])", text, re.IGNORECASE)
    if named:
        return named.start(), text[named.end():]
    words = {w.lower() for w in _WORD.findall(description)}
    hits = [m for m in _WORD.finditer(text) if m.group(0).lower() in words]
    if len({m.group(0).lower() for m in hits}) >= 2:
        return hits[0].start(), text
    return None, ""


def _arguments(text: str, rest: str, schema: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = schema.get("properties") or {}
    required = [p for p in schema.get("required") or [] if p in properties]
    ordered = required + [p for p in properties if p not in required]
    arguments: dict[str, Any] = {}
    strings_left = [*_QUOTED.findall(text), _after_name(rest)]
    for name in ordered:
        value = _value_for(name, properties[name] or {}, text, strings_left if name in required else [])
        if value is not None:
            arguments[name] = value
    return arguments


def _value_for(name: str, prop: dict[str, Any], text: str, strings_left: list[str]) -> Any:
    explicit = re.search(rf"\b{re.escape(name)}\s*[=:]\s*(\"[^\"]*\"|\S+)", text, re.IGNORECASE)
    kind = prop.get("type")
    if explicit:
        return _typed(explicit.group(1).strip('"').rstrip(".,;"), kind)
    if kind in ("integer", "number"):
        number = _NUMBER.search(text)
        if number:
            return _typed(number.group(0), kind)
    elif kind in (None, "string") and "enum" not in prop:
        while strings_left:
            candidate = strings_left.pop(0).strip()
            if candidate:
                return candidate
    if "default" in prop:
        return prop["default"]
    if prop.get("enum"):
        return prop["enum"][0]
    return None


def _typed(raw: str, kind: Any) -> Any:
    try:
        if kind == "integer":
            return int(float(raw))
        if kind == "number":
            return float(raw)
    except ValueError:
        return raw
    if kind == "boolean":
        return raw.lower() in ("true", "yes", "1")
    return raw


def _after_name(rest: str) -> str:
    """The words after the tool's name, up to the end of the sentence
    ("lookup order 42 please" gives "42 please"; "for", "about" and the like
    dropped from the front)."""
    sentence = re.split(r"[.?!\n]", rest, maxsplit=1)[0]
    sentence = re.sub(r"^\s*(?:tool\b)?\s*(?:for|about|with|on|of|to)?\b\s*", "", sentence, flags=re.IGNORECASE)
    return sentence.strip(" :,")
