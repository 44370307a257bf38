"""The pool checks a borrowed connection only when it has sat idle
(chatforge/db/postgresql/base.py): one given back moments ago is handed out
without the empty query; one idle longer, or never given back, is checked,
and a broken one is then noticed, as with Django's own check."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from chatforge.db.postgresql import base as backend

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="the Postgres backend's pool")


@pytest.fixture
def broken_connection(db):
    """A real connection whose server process has been ended."""
    params = connection.get_connection_params()
    params.pop("context", None)
    params.pop("cursor_factory", None)
    params.pop("prepare_threshold", None)
    conn = psycopg.connect(**params, autocommit=True)
    pid = conn.info.backend_pid
    with psycopg.connect(**params, autocommit=True) as admin:
        # With a timeout it returns once the process has ended (Postgres 14+).
        assert admin.execute("SELECT pg_terminate_backend(%s, 5000)", [pid]).fetchone() == (True,)
    yield conn
    conn.close()


def test_a_connection_given_back_moments_ago_is_not_checked(broken_connection):
    backend.note_given_back(broken_connection)
    backend.check_unless_fresh(broken_connection)  # no query sent: nothing noticed


def test_a_connection_idle_longer_is_checked(broken_connection, monkeypatch):
    backend.note_given_back(broken_connection)
    clock = backend.time.monotonic() + backend.FRESH_S
    monkeypatch.setattr(backend.time, "monotonic", lambda: clock)
    with pytest.raises(psycopg.OperationalError):
        backend.check_unless_fresh(broken_connection)


def test_a_connection_never_given_back_is_checked(broken_connection):
    with pytest.raises(psycopg.OperationalError):
        backend.check_unless_fresh(broken_connection)


@pytest.mark.django_db(transaction=True)  # outside a test transaction, close() gives the connection back
def test_the_pool_checks_with_it_and_each_connection_given_back_is_noted():
    assert connection.pool._check is backend.check_unless_fresh  # psycopg_pool keeps the callback there
    connection.ensure_connection()
    raw = connection.connection
    before = backend.time.monotonic()
    connection.close()  # back to the pool
    assert backend._given_back_at[raw] >= before
