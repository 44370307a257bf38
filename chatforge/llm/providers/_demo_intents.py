"""What the demo model "understands" in a user message: time questions,
arithmetic and echo requests. Plain regular expressions, so the demo stays
deterministic and needs no model; kept apart from the provider so the
parsing rules can be read and tested on their own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# Cities people are likely to type, mapped to IANA zones. Not exhaustive: an
# explicit zone such as "Europe/Paris" always works.
CITY_ZONES: dict[str, str] = {
    "tokyo": "Asia/Tokyo",
    "paris": "Europe/Paris",
    "london": "Europe/London",
    "berlin": "Europe/Berlin",
    "madrid": "Europe/Madrid",
    "rome": "Europe/Rome",
    "amsterdam": "Europe/Amsterdam",
    "moscow": "Europe/Moscow",
    "new york": "America/New_York",
    "chicago": "America/Chicago",
    "denver": "America/Denver",
    "los angeles": "America/Los_Angeles",
    "san francisco": "America/Los_Angeles",
    "toronto": "America/Toronto",
    "sao paulo": "America/Sao_Paulo",
    "são paulo": "America/Sao_Paulo",
    "mexico city": "America/Mexico_City",
    "sydney": "Australia/Sydney",
    "singapore": "Asia/Singapore",
    "hong kong": "Asia/Hong_Kong",
    "shanghai": "Asia/Shanghai",
    "beijing": "Asia/Shanghai",
    "seoul": "Asia/Seoul",
    "mumbai": "Asia/Kolkata",
    "delhi": "Asia/Kolkata",
    "new delhi": "Asia/Kolkata",
    "dubai": "Asia/Dubai",
    "cairo": "Africa/Cairo",
    "johannesburg": "Africa/Johannesburg",
    "utc": "UTC",
}

_TIME_QUESTION = re.compile(r"\b(time|date|clock|today|what day)\b", re.IGNORECASE)
_IANA_ZONE = re.compile(r"\b(?:[A-Z][A-Za-z_]+/){1,2}[A-Z][A-Za-z_]+\b")
# Longest names first so "new delhi" wins over "delhi".
_CITY_NAMES = "|".join(sorted(map(re.escape, CITY_ZONES), key=len, reverse=True))
_CITY = re.compile(rf"\b({_CITY_NAMES})\b", re.IGNORECASE)
_ECHO = re.compile(r"\b(?:echo|repeat(?:\s+after\s+me)?)\b[\s:,]+(?P<text>.+)", re.IGNORECASE | re.DOTALL)
# A run of characters that can make up an expression; validated afterwards.
_EXPRESSION_RUN = re.compile(r"[-+*/%().\d\s]+")
_BINARY_OPERATION = re.compile(r"[\d.)]\s*(?:\*\*|[-+*/%])\s*[-(\d.]")
_DATE_LIKE = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}$")
_OPERATOR_CHARS = "+-*/%."


@dataclass(frozen=True)
class Intent:
    """A tool the text asks for, at ``position`` in the text (calls are made in
    the order the user asked)."""

    position: int
    tool: str
    arguments: dict[str, Any]


def detect_intents(text: str, offered: set[str]) -> list[Intent]:
    """Every tool call the text asks for, restricted to ``offered`` tools."""
    intents: list[Intent] = []
    scanned = text
    echo = _ECHO.search(text)
    if echo and "echo" in offered:
        # Everything after "echo" is the payload, not more requests.
        intents.append(Intent(echo.start(), "echo", {"text": _unquote(echo.group("text"))}))
        scanned = text[: echo.start()]
    if "get_time" in offered:
        intents.extend(_time_intents(scanned))
    if "calculator" in offered:
        intents.extend(
            Intent(position, "calculator", {"expression": expression})
            for position, expression in find_expressions(scanned)
        )
    return sorted(intents, key=lambda intent: intent.position)


def _time_intents(text: str) -> list[Intent]:
    question = _TIME_QUESTION.search(text)
    if not question:
        return []
    zones: dict[str, int] = {}
    for match in _IANA_ZONE.finditer(text):
        zones.setdefault(match.group(0), match.start())
    for match in _CITY.finditer(text):
        zones.setdefault(CITY_ZONES[match.group(1).lower()], match.start())
    if not zones:
        return [Intent(question.start(), "get_time", {})]
    return [Intent(position, "get_time", {"timezone": zone}) for zone, position in zones.items()]


def find_expressions(text: str) -> list[tuple[int, str]]:
    """``(position, expression)`` for each arithmetic expression in ``text``,
    e.g. "2+2", "(3 + 4) * 5", "2**10". A lone number or a date is not one."""
    found: list[tuple[int, str]] = []
    for run in _EXPRESSION_RUN.finditer(text):
        expression = _tidy(run.group(0))
        if expression and _BINARY_OPERATION.search(expression) and not _DATE_LIKE.match(expression):
            found.append((run.start() + run.group(0).find(expression[0]), expression))
    return found


def _tidy(candidate: str) -> str:
    """Drop unmatched parentheses and dangling operators the run picked up
    from the surrounding sentence ("is 2+2." → "2+2")."""
    expression = _balance_parentheses(candidate).strip()
    while expression and expression[-1] in _OPERATOR_CHARS:
        expression = expression[:-1].rstrip()
    while expression and expression[0] in _OPERATOR_CHARS and not re.match(r"-[\d(]", expression):
        expression = expression[1:].lstrip()
    return expression


def _balance_parentheses(candidate: str) -> str:
    keep = [True] * len(candidate)
    open_positions: list[int] = []
    for position, char in enumerate(candidate):
        if char == "(":
            open_positions.append(position)
        elif char == ")":
            if open_positions:
                open_positions.pop()
            else:
                keep[position] = False
    for position in open_positions:
        keep[position] = False
    return "".join(char for char, kept in zip(candidate, keep) if kept)


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text
