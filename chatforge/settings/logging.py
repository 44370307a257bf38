"""Logging: plain structured-enough lines to stderr; level from the environment."""

from __future__ import annotations

from chatforge.env import env
from chatforge.runtime.log_redaction import with_redaction

LOG_LEVEL: str = env.str("CHATFORGE_LOG_LEVEL", default="INFO")

# Every handler drops credentials from what it writes (runtime/log_redaction.py).
LOGGING = with_redaction({
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(process)d %(message)s"},
    },
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["stderr"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},  # the HTTP stack inside the openai SDK
        "openai": {"level": "WARNING"},
    },
})
