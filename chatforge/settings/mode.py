"""Which of the two run modes this process is in.

Embedded (no environment needed): SQLite, in-memory broker with worker threads
inside the server process, in-memory event log. Distributed: Postgres and
Redis, separate ``celery worker`` processes. Both run the same tasks; the mode
is named explicitly rather than inferred from a failing connection.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from chatforge.settings.env import env

DATABASE_URL: str = env.str("DATABASE_URL", default="")
REDIS_URL: str = env.str("REDIS_URL", default="")

if bool(DATABASE_URL) != bool(REDIS_URL):
    raise ImproperlyConfigured(
        "Distributed mode needs both DATABASE_URL and REDIS_URL. Set both "
        "(postgres://… and redis://…), or neither to run in embedded mode."
    )

CHATFORGE_MODE: str = "distributed" if DATABASE_URL else "embedded"
EMBEDDED: bool = CHATFORGE_MODE == "embedded"
