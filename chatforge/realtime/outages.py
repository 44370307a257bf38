"""Which exceptions mean "a service we depend on is unreachable".

A websocket that fails because Postgres or Redis is down is not a bug in
the request or in our code: the client should come back later. Handshakes
answer such failures with HTTP 503 (``handshake.py``) and open sockets close
with 1013 "try again later" (``close_codes.py``), where any other failure
is a 500 or a 1011.
"""

from __future__ import annotations

from django.db import InterfaceError as DatabaseInterfaceError
from django.db import OperationalError as DatabaseOperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError


def _driver_errors() -> tuple[type[BaseException], ...]:
    """psycopg's own OperationalError (psycopg_pool's PoolTimeout is one):
    Django wraps what it raises as django.db.OperationalError, this catches
    what escapes unwrapped. Absent when psycopg is not installed (embedded mode)."""
    try:
        import psycopg
    except ImportError:
        return ()
    return (psycopg.OperationalError, psycopg.InterfaceError)


OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    DatabaseOperationalError,
    DatabaseInterfaceError,
    RedisConnectionError,
    RedisTimeoutError,
    *_driver_errors(),
)


def is_outage(exc: BaseException) -> bool:
    """True when ``exc`` says the database or Redis could not be reached."""
    return isinstance(exc, OUTAGE_ERRORS)
