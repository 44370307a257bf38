"""A client's error is one log line; a server's error keeps its traceback.

Django logs every 4xx answer on ``django.request`` (``Forbidden: /path``).
For the ones raised as exceptions - ``PermissionDenied`` (the admin's pages
a staff user may not open), ``BadRequest``, ``SuspiciousOperation``
(``django.security.*``, such as a foreign Host header) - it hands the
exception along (``exc_info``), and the formatter printed its full
traceback: a refusal that is working as intended read like a crash. (In
debug - ``make run`` - Django's own console handler printed it a second
time; settings/logging.py leaves Django's records to our one handler.)

This filter takes the traceback off any record that reports an HTTP answer
below 500 (Django's ``status_code`` extra): the line, its level, the path,
the status and the request id stay. A 5xx keeps its traceback: that is
where it is needed.
"""

from __future__ import annotations

import logging
from typing import Any


class ClientErrorsWithoutTraceback(logging.Filter):
    """Drops ``exc_info`` (and any rendered traceback or stack) from records
    about 4xx answers; never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and status < 500 and (record.exc_info or record.exc_text or record.stack_info):
            record.exc_info = None
            record.exc_text = None
            record.stack_info = None
        return True


FILTER_CONFIG = {"client_errors_without_traceback": {
    "()": "chatforge.observability.client_error_logs.ClientErrorsWithoutTraceback"}}


def with_concise_client_errors(config: dict[str, Any]) -> dict[str, Any]:
    """A logging dictConfig with the filter on every handler (a new dict)."""
    handlers = {
        name: {**handler, "filters": [*handler.get("filters", []), *FILTER_CONFIG]}
        for name, handler in config.get("handlers", {}).items()
    }
    return {**config, "filters": {**config.get("filters", {}), **FILTER_CONFIG}, "handlers": handlers}
