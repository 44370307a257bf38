"""What counts as "a service is unreachable" (503 / 1013) and what stays a
programming error (500 / 1011). The exceptions are real: raised by drivers
talking to ports nobody listens on, and by Postgres and SQLite refusing bad
statements."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest
import redis
from django.db import DatabaseError, IntegrityError, ProgrammingError, connection, transaction
from django.db import OperationalError as DatabaseOperationalError
from kombu import Connection as BrokerConnection
from psycopg_pool import ConnectionPool

from chatforge.errors.outages import is_outage
from orchestration.event_log.events import EventLogUnavailable
from tests.support.stack import free_port


def _raised(call) -> BaseException:
    try:
        call()
    except BaseException as exc:  # noqa: BLE001 - returned for inspection
        return exc
    raise AssertionError("expected an exception")


def _wrapped_by_django(driver_exc: BaseException) -> DatabaseOperationalError:
    """What Django raises for a driver's OperationalError (DatabaseErrorWrapper)."""
    try:
        raise DatabaseOperationalError(*driver_exc.args) from driver_exc
    except DatabaseOperationalError as exc:
        return exc


def test_postgres_refusing_connections_is_an_outage():
    refused = _raised(lambda: psycopg.connect(f"host=127.0.0.1 port={free_port()} user=x connect_timeout=2"))
    assert isinstance(refused, psycopg.OperationalError)
    assert is_outage(refused)
    assert is_outage(_wrapped_by_django(refused))


def test_no_pooled_connection_in_time_is_an_outage():
    pool = ConnectionPool(f"host=127.0.0.1 port={free_port()} user=x", min_size=0, max_size=1, timeout=0.2,
                          reconnect_timeout=0.2, open=True)
    try:
        timeout = _raised(pool.getconn)
    finally:
        pool.close()
    assert type(timeout).__name__ == "PoolTimeout"
    assert is_outage(timeout)
    assert is_outage(_wrapped_by_django(timeout))


def test_redis_broker_and_event_log_unreachable_are_outages():
    port = free_port()
    assert is_outage(_raised(lambda: redis.Redis(port=port, socket_connect_timeout=1).ping()))
    broker = BrokerConnection(f"redis://127.0.0.1:{port}/0")
    assert is_outage(_raised(lambda: broker.ensure_connection(max_retries=1)))
    assert is_outage(EventLogUnavailable("the event log is unreachable"))


@pytest.mark.django_db
def test_errors_a_statement_causes_are_not_outages():
    def bad_savepoint() -> None:  # SQLSTATE 3B001: an OperationalError by class, a bug by nature
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("ROLLBACK TO SAVEPOINT never_made")

    savepoint = _raised(bad_savepoint)
    assert isinstance(savepoint, DatabaseOperationalError)
    assert not is_outage(savepoint)

    def missing_table() -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT * FROM no_such_table")

    assert isinstance(_raised(missing_table), ProgrammingError)
    assert not is_outage(_raised(missing_table))
    assert not is_outage(IntegrityError("duplicate key"))
    assert not is_outage(DatabaseError("something else"))
    assert not is_outage(ValueError("a bug"))


def test_sqlite_busy_is_an_outage_and_a_missing_table_is_not():
    missing = _raised(lambda: sqlite3.connect(":memory:").execute("SELECT * FROM nope"))
    assert not is_outage(_wrapped_by_django(missing))

    path = f"file:outages-{free_port()}?mode=memory&cache=shared"
    holder = sqlite3.connect(path, uri=True, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("INSERT INTO t VALUES (1)")
    other = sqlite3.connect(path, uri=True, timeout=0, isolation_level=None)
    locked = _raised(lambda: other.execute("INSERT INTO t VALUES (2)"))
    holder.execute("ROLLBACK")
    assert isinstance(locked, sqlite3.OperationalError), locked
    assert is_outage(_wrapped_by_django(locked))
