"""Logging: JSON lines in distributed mode (one object per line, for log
collectors), readable text in embedded mode; level from the environment.

Every record — ours, Django's, Celery's, uvicorn's through Django's root
handler — goes through structlog's formatter, which adds the context bound
for the request or task (run_id, conversation_id, user_id, tool_call_id,
request_id, task_id: chatforge/observability/log_context.py) and the
``extra`` fields a call passed. Credentials are removed from every field a
line prints, extras and tracebacks included (runtime/log_redaction.py); an
answer below 500 is logged as one line, without a traceback
(runtime/client_error_logs.py).
"""

from __future__ import annotations

import structlog
from django.core.exceptions import ImproperlyConfigured

from chatforge.observability.client_error_logs import with_concise_client_errors
from chatforge.observability.log_redaction import redact_event, with_redaction
from chatforge.settings.env import env

from .mode import EMBEDDED

LOG_LEVEL: str = env.str("CHATFORGE_LOG_LEVEL", default="INFO")
# "json" or "text"; default: json in distributed mode, text in embedded mode.
CHATFORGE_LOG_FORMAT: str = env.str("CHATFORGE_LOG_FORMAT", default="text" if EMBEDDED else "json")
if CHATFORGE_LOG_FORMAT not in ("json", "text"):
    raise ImproperlyConfigured(f"CHATFORGE_LOG_FORMAT must be 'json' or 'text', not {CHATFORGE_LOG_FORMAT!r}")

def _access_fields(logger, method_name: str, event_dict: dict) -> dict:
    """uvicorn's access lines as fields (client, method, path, status), not
    only as text: its record's arguments, already redacted by the handler's
    filter, become keys a log query can select on."""
    args = event_dict.pop("positional_args", None)  # a foreign record's (pass_foreign_args)
    record = event_dict.get("_record")
    if record is not None and record.name == "uvicorn.access" and isinstance(args, tuple) and len(args) == 5:
        client, method, path, _, status = args
        event_dict.update(client=client, method=method, path=path, status=status)
    return event_dict


def _drop_color_message(logger, method_name: str, event_dict: dict) -> dict:
    """uvicorn passes its messages a second time, with ANSI colour codes, as
    ``extra={"color_message": …}`` for its own colouring formatter; taken as
    an extra field it put escape codes into every text and JSON line."""
    event_dict.pop("color_message", None)
    return event_dict


# What every record gets before it is rendered.
_SHARED = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.stdlib.ExtraAdder(),
    _drop_color_message,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
    structlog.processors.CallsiteParameterAdder([structlog.processors.CallsiteParameter.PROCESS]),
    _access_fields,
]
_RENDERER = (
    structlog.processors.JSONRenderer()
    if CHATFORGE_LOG_FORMAT == "json"
    else structlog.dev.ConsoleRenderer(colors=False)
)

# 4xx lines without tracebacks (runtime/client_error_logs.py), credentials redacted.
LOGGING = with_concise_client_errors(with_redaction({
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "structured": {
            "()": structlog.stdlib.ProcessorFormatter,
            "foreign_pre_chain": _SHARED,
            "pass_foreign_args": True,  # for _access_fields
            "processors": [
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                redact_event,  # every field about to be printed, the traceback included
                _RENDERER,
            ],
        },
    },
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "structured"}},
    "root": {"handlers": ["stderr"], "level": LOG_LEVEL},
    "loggers": {
        # Django's default handlers (a console one in debug, mail to ADMINS) wrote
        # its records a second time, unformatted and unredacted: ours is the one.
        "django": {"handlers": []},
        "django.db.backends": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},  # the HTTP stack inside the openai SDK
        "openai": {"level": "WARNING"},
    },
}))


def uvicorn_log_config() -> dict:
    """uvicorn's loggers (server, errors, access lines) through the same
    structured handler as everything else (``serve`` hands this to uvicorn,
    which applies it in each web process): JSON lines in distributed mode,
    credentials redacted."""
    own = {name: {"handlers": [], "level": LOG_LEVEL, "propagate": True}
           for name in ("uvicorn", "uvicorn.error", "uvicorn.access")}
    return {**LOGGING, "loggers": {**LOGGING["loggers"], **own}}
