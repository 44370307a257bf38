"""Database: Postgres in distributed mode, a local SQLite file in embedded mode."""

from __future__ import annotations

import dj_database_url

from chatforge.env import env

from .base import BASE_DIR
from .mode import DATABASE_URL, EMBEDDED

if EMBEDDED:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": env.str("CHATFORGE_SQLITE_PATH", default=str(BASE_DIR / "chatforge.sqlite3")),
            "OPTIONS": {
                # Worker threads write concurrently: take the write lock at the
                # start of each transaction so fan-in decisions are serialised,
                # and wait instead of failing with "database is locked".
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }
else:
    DATABASES = {
        "default": dj_database_url.parse(
            DATABASE_URL,
            conn_max_age=env.int("DATABASE_CONN_MAX_AGE", default=60),
            # Off by default: a check costs a round trip per task, and a stale
            # connection already fails the task into a retry (and is replaced).
            conn_health_checks=env.bool("DATABASE_CONN_HEALTH_CHECKS", default=False),
        )
    }
