"""Scrubbing secret values from what a tool call gives back.

A tool may be handed secrets - the calling user's stored keys, the
operator's configured keys, environment values filled into an HTTP tool's
``${…}`` placeholders - and the service it calls may echo them back, in a
result or an error ("invalid key: Bearer tvly-…"). Whatever a tool returns
goes to the model, the database, the event stream and maybe the logs, so the
executor scrubs every value the call was handed from its result, its error
text and what it logs, for every tool, in one place
(``tools.executor``). Tools only have to say which secrets they use:
``ToolContext.secret`` records the user's automatically, and
``ToolContext.uses_secret`` records any other.

Values shorter than ``MIN_SECRET_LENGTH`` are not scrubbed: they would match
ordinary text everywhere, and no real key is that short.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

REDACTED = "[redacted]"
MIN_SECRET_LENGTH = 4


class SecretsSeen:
    """The secret values one tool call was handed. The handler runs in its own
    thread (and may still run after a timeout), so access is locked."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._lock = threading.Lock()

    def add(self, value: str | None) -> None:
        if value and len(value) >= MIN_SECRET_LENGTH:
            with self._lock:
                self._values.add(value)

    def values(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._values)


def _forms(values: Iterable[str]) -> list[str]:
    """Each value as written and percent-encoded (as it appears in a URL),
    longest first, so a secret containing another is replaced whole."""
    forms = {form for value in values for form in (value, quote(value, safe=""))}
    return sorted((f for f in forms if len(f) >= MIN_SECRET_LENGTH), key=len, reverse=True)


def redact_text(text: str, values: Iterable[str]) -> str:
    """``text`` with every form of every value replaced by ``REDACTED``."""
    for form in _forms(values):
        text = text.replace(form, REDACTED)
    return text


def redact_value(value: Any, values: Iterable[str]) -> Any:
    """A JSON-like ``value`` with the values scrubbed from its strings, keys included."""
    forms = _forms(values)
    if not forms:
        return value
    return _redact_forms(value, forms)


def _redact_forms(value: Any, forms: list[str]) -> Any:
    if isinstance(value, str):
        for form in forms:
            value = value.replace(form, REDACTED)
        return value
    if isinstance(value, list):
        return [_redact_forms(item, forms) for item in value]
    if isinstance(value, dict):
        return {_redact_forms(str(key), forms): _redact_forms(item, forms) for key, item in value.items()}
    return value
