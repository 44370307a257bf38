"""Credentials never reach a log line.

uvicorn logs each request's path with its query string, in the access log
for HTTP and in its error logger for websockets (``"WebSocket /ws/runs/…"``).
A client that authenticates with ``?token=cf_…`` (the old way for browser
websockets) put its API token into every log. This filter rewrites log
records before any handler writes them: the values of credential-looking
query parameters, and anything shaped like a ChatForge API token, become
``[redacted]``. It is installed on uvicorn's handlers (``serve``) and on the
handler of Django's logging (settings/logging.py).
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
# A ChatForge API token anywhere (its prefix and urlsafe body; see accounts/tokens.py).
_API_TOKEN = re.compile(r"\bcf_[A-Za-z0-9_-]{16,}")


def redact_credentials(text: str) -> str:
    if "=" not in text and "cf_" not in text:
        return text
    return _API_TOKEN.sub(REDACTED, _QUERY_CREDENTIAL.sub(rf"\g<1>{REDACTED}", text))


def _redact_arg(value: Any) -> Any:
    return redact_credentials(value) if isinstance(value, str) else value


class RedactCredentialsFilter(logging.Filter):
    """Rewrites the message and its string arguments; never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact_credentials(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_redact_arg(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: _redact_arg(value) for key, value in record.args.items()}
        return True


FILTER_CONFIG = {"redact_credentials": {"()": "chatforge.runtime.log_redaction.RedactCredentialsFilter"}}


def with_redaction(config: dict[str, Any]) -> dict[str, Any]:
    """A logging dictConfig with the filter on every handler (a new dict)."""
    handlers = {
        name: {**handler, "filters": [*handler.get("filters", []), "redact_credentials"]}
        for name, handler in config.get("handlers", {}).items()
    }
    return {**config, "filters": {**config.get("filters", {}), **FILTER_CONFIG}, "handlers": handlers}
