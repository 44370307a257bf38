"""Database: Postgres in distributed mode, a local SQLite file in embedded mode.

In distributed mode every process borrows its connections from a psycopg
connection pool of its own (Django's native pool, ``OPTIONS["pool"]``), so
the connections a process holds are bounded by ``DATABASE_POOL_MAX_SIZE``
however many threads it runs. Without a pool each thread kept a connection
of its own (Django's ASGI handler runs every request in a new thread, and
CONN_MAX_AGE kept each one open): a hundred concurrent requests held over a
hundred connections and Postgres refused the next client.

A connection goes back to the pool when Django closes it: at the end of a
request, at the end of a Celery task (``chatforge/db/connections.py``),
after each lease renewal of the heartbeat thread, and while a model turn
waits on the network. Sizing against ``max_connections`` is in
docs/decisions/0010-database-connection-pool.md.
"""

from __future__ import annotations

from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from chatforge.settings.env import env

from .base import BASE_DIR
from .mode import DATABASE_URL, EMBEDDED

# The engine's fan-in uses UPDATE … RETURNING (docs/decisions/0013-…).
SQLITE_MINIMUM = (3, 35)

if EMBEDDED:
    import sqlite3

    if sqlite3.sqlite_version_info < SQLITE_MINIMUM:
        raise ImproperlyConfigured(
            f"Embedded mode needs SQLite {'.'.join(map(str, SQLITE_MINIMUM))} or newer; this Python has "
            f"{sqlite3.sqlite_version}. Use a newer Python build, or set DATABASE_URL to a Postgres database."
        )
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
    DATABASE_POOL: bool = env.bool("DATABASE_POOL", default=True)
    if DATABASE_POOL:
        # Connections kept open while idle. Small: each prefork child of the
        # tools worker has a pool of its own.
        DATABASE_POOL_MIN_SIZE: int = env.int("DATABASE_POOL_MIN_SIZE", default=1)
        # The most connections this process opens; past it a thread waits.
        DATABASE_POOL_MAX_SIZE: int = env.int("DATABASE_POOL_MAX_SIZE", default=10)
        # How long a thread waits for a free connection before its request is
        # answered 503 (or its task retried). Also how long the pool keeps
        # retrying a failed connection attempt before it gives up and lets the
        # next borrower start a fresh one, so that after a long outage the pool
        # reconnects within seconds instead of after a long backoff.
        DATABASE_POOL_TIMEOUT_S: float = env.float("DATABASE_POOL_TIMEOUT_S", default=10.0)
        if not 0 <= DATABASE_POOL_MIN_SIZE <= DATABASE_POOL_MAX_SIZE or DATABASE_POOL_MAX_SIZE < 1:
            raise ImproperlyConfigured(
                f"DATABASE_POOL_MIN_SIZE ({DATABASE_POOL_MIN_SIZE}) must be between 0 and "
                f"DATABASE_POOL_MAX_SIZE ({DATABASE_POOL_MAX_SIZE}), which must be at least 1."
            )
        if DATABASE_POOL_TIMEOUT_S <= 0:
            raise ImproperlyConfigured("DATABASE_POOL_TIMEOUT_S must be more than 0 seconds.")
        _pool: dict[str, Any] = {
            "name": "chatforge",
            "min_size": DATABASE_POOL_MIN_SIZE,
            "max_size": DATABASE_POOL_MAX_SIZE,
            "timeout": DATABASE_POOL_TIMEOUT_S,
            "reconnect_timeout": DATABASE_POOL_TIMEOUT_S,
        }
        DATABASES = {
            "default": dj_database_url.parse(
                DATABASE_URL,
                conn_max_age=0,  # required with a pool: closing returns the connection to it
                # On by default with a pool: a connection is checked (one empty
                # query) when borrowed, so the connections left idle across a
                # Postgres restart are replaced instead of failing the first
                # request or task that gets each of them.
                conn_health_checks=env.bool("DATABASE_CONN_HEALTH_CHECKS", default=True),
            )
        }
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = _pool
        # Django's backend, with a pool that skips the borrow check for a
        # connection given back moments ago (chatforge/db/postgresql/base.py).
        DATABASES["default"]["ENGINE"] = "chatforge.db.postgresql"
    else:
        # Persistent connections, one per thread (the behaviour before pooling).
        DATABASES = {
            "default": dj_database_url.parse(
                DATABASE_URL,
                conn_max_age=env.int("DATABASE_CONN_MAX_AGE", default=60),
                # Off by default: a check costs a round trip per task, and a stale
                # connection already fails the task into a retry (and is replaced).
                conn_health_checks=env.bool("DATABASE_CONN_HEALTH_CHECKS", default=False),
            )
        }

    # The engine's fixed statements (a step's claim, its record, the POST's
    # inserts: chatforge/db/sql_rows.py) are prepared on the server once per
    # connection instead of planned on every execution. Turn off behind a
    # pooler that cannot keep prepared statements (PgBouncer in transaction
    # mode before 1.21, or without max_prepared_statements).
    DATABASE_PREPARED_STATEMENTS: bool = env.bool("DATABASE_PREPARED_STATEMENTS", default=True)
    if DATABASE_PREPARED_STATEMENTS:
        # Django turns psycopg's prepared statements off (threshold None). A
        # threshold turns them on for the connection; only statements sent
        # with prepare=True (fixed_sql_cursor) are prepared, since the ORM's
        # cursors bind on the client and never prepare, so it is never reached.
        DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = 1_000_000

    # A host that vanishes mid-transaction (its link cut, its machine gone)
    # sends no COMMIT and no FIN: without these, Postgres keeps its session
    # "idle in transaction", holding the rows it locked (a step's row, its
    # run's row), until TCP keepalive gives up two hours later, and that run
    # never ends (seen in the multi-host test: tests/integration/
    # test_multihost_netns.py). Set per session, so no server configuration
    # is needed: Postgres ends a session idle in a transaction after
    # DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_S (ChatForge's transactions are
    # a few statements long and never wait on the network), and notices a
    # dead peer through keepalives and TCP_USER_TIMEOUT within about
    # DATABASE_DEAD_PEER_TIMEOUT_S; libpq's own keepalives do the same for
    # our side of the connection. 0 leaves a setting to the server.
    DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_S: float = env.float("DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_S", default=60.0)
    DATABASE_DEAD_PEER_TIMEOUT_S: int = env.int("DATABASE_DEAD_PEER_TIMEOUT_S", default=30)
    _session: list[str] = []
    if DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_S > 0:
        _session.append(f"-c idle_in_transaction_session_timeout={int(DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_S * 1000)}")
    _options = DATABASES["default"].setdefault("OPTIONS", {})
    if DATABASE_DEAD_PEER_TIMEOUT_S > 0:
        # Probes start after a third of the timeout, then every sixth: three
        # unanswered probes end the connection; TCP_USER_TIMEOUT bounds
        # unacknowledged data (a reply the dead peer never takes) the same way.
        _idle, _interval = max(1, DATABASE_DEAD_PEER_TIMEOUT_S // 3), max(1, DATABASE_DEAD_PEER_TIMEOUT_S // 6)
        _session += [f"-c tcp_keepalives_idle={_idle}", f"-c tcp_keepalives_interval={_interval}",
                     "-c tcp_keepalives_count=3", f"-c tcp_user_timeout={DATABASE_DEAD_PEER_TIMEOUT_S * 1000}"]
        _options.update(keepalives=1, keepalives_idle=_idle, keepalives_interval=_interval, keepalives_count=3,
                        tcp_user_timeout=DATABASE_DEAD_PEER_TIMEOUT_S * 1000)
    if _session:
        _options["options"] = " ".join(filter(None, [_options.get("options", ""), *_session]))
