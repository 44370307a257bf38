"""Which exceptions mean "a service we depend on is unreachable".

A request or websocket that fails because Postgres, Redis or the broker is
down is not a bug in the request or in our code: the client should come back
later. Handshakes answer such failures with HTTP 503
(``chatforge/realtime/handshake.py``), open sockets close with 1013 "try
again later" (``chatforge/realtime/close_codes.py``), the HTTP API answers
503 with Retry-After (``chatforge/api/errors.py``), where any other failure
is a 500 or a 1011, and the engine hands a step back to be run again
(``orchestration/services/outage_retry.py``). It is the platform's, below
all of them.

A database error counts only when it says the database could not be reached
or used for now (connection refused or lost, no free pooled connection, too
many clients, shutting down, serialization failure…); a database error that
a query or the schema causes (a routine's exception, a program limit, a
missing SQLite table) stays the programming error it is.
"""

from __future__ import annotations

import sqlite3

from django.db import InterfaceError as DatabaseInterfaceError
from django.db import OperationalError as DatabaseOperationalError
from kombu.exceptions import OperationalError as BrokerOperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError


class DependencyUnavailable(Exception):
    """Raised by our own code when a service it depends on could not be
    reached after its retries (the engine's ``EventLogUnavailable`` is one):
    an outage, whatever raised it, without this module knowing the layers
    above it."""


def _driver_errors() -> tuple[type[BaseException], ...]:
    """psycopg's own OperationalError (psycopg_pool's PoolTimeout is one):
    Django wraps what it raises as django.db.OperationalError, this catches
    what escapes unwrapped. Absent when psycopg is not installed (embedded mode)."""
    try:
        import psycopg
    except ImportError:
        return ()
    return (psycopg.OperationalError, psycopg.InterfaceError)


_DRIVER_ERRORS = _driver_errors()
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    DatabaseOperationalError,
    DatabaseInterfaceError,
    RedisConnectionError,
    RedisTimeoutError,
    BrokerOperationalError,
    DependencyUnavailable,
    *_DRIVER_ERRORS,
)

# SQLSTATE classes of server errors that say "not now" rather than "not this
# query": 08 connection exception, 40 transaction rollback, 53 insufficient
# resources (too many clients, disk full), 55 object not in prerequisite state
# (lock not available), 57 operator intervention (shutdown, cannot connect now),
# 58 system error. Errors the client raises itself (refused, lost, pool
# timeout) carry no SQLSTATE and always count.
_TRANSIENT_SQLSTATE_CLASSES = frozenset({"08", "40", "53", "55", "57", "58"})
# SQLite (embedded mode): busy, locked, I/O error, full, cannot open.
_TRANSIENT_SQLITE_CODES = frozenset({5, 6, 10, 13, 14})


def _database_error_is_transient(exc: BaseException) -> bool:
    driver = exc.__cause__ if isinstance(exc, DatabaseOperationalError | DatabaseInterfaceError) else exc
    if isinstance(driver, sqlite3.OperationalError):
        return (getattr(driver, "sqlite_errorcode", 0) & 0xFF) in _TRANSIENT_SQLITE_CODES
    sqlstate = getattr(driver, "sqlstate", None)
    return sqlstate is None or sqlstate[:2] in _TRANSIENT_SQLSTATE_CLASSES


def is_outage(exc: BaseException) -> bool:
    """True when ``exc`` says the database, Redis or the broker could not be reached."""
    if not isinstance(exc, OUTAGE_ERRORS):
        return False
    if isinstance(exc, (DatabaseOperationalError, DatabaseInterfaceError, *_DRIVER_ERRORS)):
        return _database_error_is_transient(exc)
    return True  # Redis, the broker, the event log
