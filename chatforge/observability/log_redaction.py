"""Credentials never reach a log line.

uvicorn logs each request's path with its query string, in the access log
for HTTP and in its error logger for websockets (``"WebSocket /ws/runs/…"``).
A client that authenticates with ``?token=cf_…`` (the old way for browser
websockets) put its API token into every log. This filter rewrites log
records before any handler writes them: the values of credential-looking
query parameters, and anything shaped like a ChatForge API token, become
``[redacted]``. It is installed on uvicorn's handlers (``serve``) and on the
handler of Django's logging (settings/logging.py).

A record carries more than its message: Django's ``django.request`` lines
(``Unauthorized: /api/conversations/``) pass the request itself as the
``request`` extra, whose repr holds the full query string
(``<ASGIRequest: GET '/api/conversations/?token=cf_…'>``), and the formatter
prints every extra, the exception's traceback and its stack. So redaction
works at two levels:

- the filter rewrites what a record holds as text - message, arguments,
  every extra field (walking dicts and lists; bytes such as a scope's
  ``query_string`` too), a traceback already rendered to ``exc_text``, the
  stack - and leaves other objects alone (another handler may need the
  request object itself);
- ``redact_event``, a processor of the structured formatter placed after the
  traceback is rendered and before the JSON or text renderer, rewrites every
  field that is about to be printed, and an object whose repr would print a
  credential (the request) is printed as that repr, redacted.

Fields keep their types (numbers stay numbers, dicts dicts): log queries on
``status_code`` or ``path`` work as before.
"""

from __future__ import annotations

import logging
import re
from typing import Any

REDACTED = "[redacted]"

# token=…, access_token=…, api_key=…, apikey=…, key=…, password=… in a query string.
_QUERY_CREDENTIAL = re.compile(
    r"(?i)([?&](?:token|access_token|api[_-]?key|key|password|secret)=)[^&#\s\"']*"
)
# A ChatForge API token anywhere (its prefix and urlsafe body; see accounts/tokens.py),
# even glued to other text ("%0Acf_…" in a query string, "\\ncf_…" in a repr).
_API_TOKEN = re.compile(r"cf_[A-Za-z0-9_-]{16,}")
# Values printed as they are: nothing in them to redact.
_PLAIN = (int, float, bool, type(None))
# How deep the walk goes into nested extras (a cycle must not recurse forever).
_MAX_DEPTH = 8
# A record's own attributes; anything else on it is an ``extra`` field.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def redact_credentials(text: str) -> str:
    if "=" not in text and "cf_" not in text:
        return text
    return _API_TOKEN.sub(REDACTED, _QUERY_CREDENTIAL.sub(rf"\g<1>{REDACTED}", text))


def redact_value(value: Any, *, objects: bool = False, depth: int = 0) -> Any:
    """``value`` with credentials redacted in every string it holds, keeping
    its shape: dicts, lists, tuples and sets are copied (never changed in
    place: an extra may be the caller's live object, such as a scope), bytes
    that hold a credential become the redacted text. Other objects are kept,
    unless ``objects``: then one whose repr shows a credential becomes that
    repr, redacted (what a renderer would have printed)."""
    if isinstance(value, str):
        return redact_credentials(value)
    if isinstance(value, _PLAIN):
        return value
    if depth < _MAX_DEPTH:
        kind = type(value)
        if kind is dict:
            return {redact_value(k, objects=objects, depth=depth + 1): redact_value(v, objects=objects, depth=depth + 1)
                    for k, v in value.items()}
        if kind in (list, tuple, set, frozenset):
            return kind(redact_value(item, objects=objects, depth=depth + 1) for item in value)
    if isinstance(value, (bytes, bytearray)):
        text = bytes(value).decode("latin-1")
        redacted = redact_credentials(text)
        return value if redacted == text else redacted
    if not objects:
        return value
    text = repr(value)  # the renderer calls it too: a repr that raises fails there as it would have
    redacted = redact_credentials(text)
    return value if redacted == text else redacted


class RedactCredentialsFilter(logging.Filter):
    """Rewrites the text a record holds - message, arguments, extra fields,
    rendered traceback, stack; never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact_credentials(record.msg)
        elif isinstance(record.msg, dict):  # a structlog event, rendered by the formatter
            record.msg = redact_value(record.msg)
        if isinstance(record.args, (tuple, dict)):
            record.args = redact_value(record.args)
        for name, value in list(vars(record).items()):
            if name not in _RECORD_ATTRIBUTES and not name.startswith("_") and not isinstance(value, _PLAIN):
                setattr(record, name, redact_value(value))
        if record.exc_text:
            record.exc_text = redact_credentials(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_credentials(record.stack_info)
        return True


# structlog's bookkeeping in an event, not printed (ProcessorFormatter removes it).
_EVENT_META = frozenset(("_record", "_from_structlog"))


def redact_event(logger: Any, method_name: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """A structlog processor: every field about to be printed, redacted
    (objects by their repr). Goes after ``format_exc_info``, so the
    traceback is text by then, and right before the renderer."""
    return {key: value if key in _EVENT_META else redact_value(value, objects=True)
            for key, value in event_dict.items()}


FILTER_CONFIG = {"redact_credentials": {"()": "chatforge.observability.log_redaction.RedactCredentialsFilter"}}


def with_redaction(config: dict[str, Any]) -> dict[str, Any]:
    """A logging dictConfig with the filter on every handler (a new dict)."""
    handlers = {
        name: {**handler, "filters": [*handler.get("filters", []), "redact_credentials"]}
        for name, handler in config.get("handlers", {}).items()
    }
    return {**config, "filters": {**config.get("filters", {}), **FILTER_CONFIG}, "handlers": handlers}
