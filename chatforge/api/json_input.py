"""Reading JSON that clients send, for the REST API and ``/v1`` alike.

``json.loads`` accepts documents that break things later: nesting deep
enough to exhaust Python's recursion (60,000 ``[`` answered 500 with a
``RecursionError``), and strings Postgres cannot store (NUL) or UTF-8 cannot
encode (a lone surrogate from a ``"\\ud800"`` escape) - each a 500 deep inside
a save. Here every body is parsed once and checked once, so such input is a
400 that says what is wrong and where (``$.messages[0].content``).
"""

from __future__ import annotations

import json
import re
from typing import Any

# Deeper than any real request (tool arguments and JSON schemas included),
# far below where recursion in the serializers or jsonschema could fail.
MAX_JSON_DEPTH = 64


class InvalidJSON(ValueError):
    """The body is not JSON we accept; ``str()`` is the sentence for the client."""


def _refuse_constant(name: str) -> Any:
    raise InvalidJSON(f"{name} is not valid JSON; send numbers as finite values.")


# A string (to its closing quote, or to the end if unterminated) or a bracket:
# brackets inside strings are text, not nesting.
_STRING_OR_BRACKET = r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\Z)|[\[\]{}]'
_TOKENS_BYTES = re.compile(_STRING_OR_BRACKET.encode(), re.DOTALL)
_TOKENS_TEXT = re.compile(_STRING_OR_BRACKET, re.DOTALL)
_OPENING = frozenset(("[", "{", b"[", b"{"))
_CLOSING = frozenset(("]", "}", b"]", b"}"))


def _too_deep() -> InvalidJSON:
    return InvalidJSON(f"The JSON is nested deeper than {MAX_JSON_DEPTH} levels; send a flatter document.")


def check_nesting(raw: bytes | str) -> None:
    """Refuse a document nested deeper than ``MAX_JSON_DEPTH`` before it is
    decoded: the decoder recurses once per level, so the check has to come
    first (a linear scan, no recursion)."""
    opening = (b"[", b"{") if isinstance(raw, bytes) else ("[", "{")
    if raw.count(opening[0]) + raw.count(opening[1]) <= MAX_JSON_DEPTH:
        return  # too few brackets to nest that deep: most bodies skip the scan
    tokens = _TOKENS_BYTES if isinstance(raw, bytes) else _TOKENS_TEXT
    depth = 0
    for match in tokens.finditer(raw):
        token = match.group()
        if token in _OPENING:
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise _too_deep()
        elif token in _CLOSING:
            depth -= 1


def parse_json(raw: bytes | str) -> Any:
    """The parsed body, or ``InvalidJSON`` with a message a person can act on."""
    check_nesting(raw)
    try:
        value = json.loads(raw, parse_constant=_refuse_constant)
    except RecursionError:  # a body in UTF-16/32, which the scan reads as bytes
        raise _too_deep() from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidJSON(f"The request body is not valid JSON ({exc}).") from None
    check_json_value(value)
    return value


def check_json_value(value: Any) -> None:
    """Refuse nesting deeper than ``MAX_JSON_DEPTH`` and strings (keys too)
    that hold a NUL character or an unpaired surrogate. Iterative, so the
    check itself cannot run out of stack."""
    stack: list[tuple[Any, int, str]] = [(value, 0, "$")]
    while stack:
        item, depth, where = stack.pop()
        if isinstance(item, str):
            _check_text(item, where)
        elif isinstance(item, (dict, list)):
            if depth >= MAX_JSON_DEPTH:
                raise InvalidJSON(f"The JSON is nested deeper than {MAX_JSON_DEPTH} levels (at {where}); "
                                  "send a flatter document.")
            if isinstance(item, dict):
                for key, child in item.items():
                    _check_text(key, f"{where} (a key)")
                    stack.append((child, depth + 1, f"{where}.{key}" if key.isidentifier() else f"{where}[{key!r}]"))
            else:
                stack.extend((child, depth + 1, f"{where}[{index}]") for index, child in enumerate(item))


def _check_text(text: str, where: str) -> None:
    if "\x00" in text:
        raise InvalidJSON(f"{where} contains a NUL character (\\u0000), which cannot be stored; remove it.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidJSON(
            f"{where} contains an unpaired UTF-16 surrogate (such as \\ud800 without its pair), which is not "
            "valid text; send well-formed Unicode."
        ) from None
