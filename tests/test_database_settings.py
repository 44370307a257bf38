"""The database settings: a connection pool per process in distributed mode
(sized by DATABASE_POOL_*), persistent connections when pooling is off,
SQLite without either in embedded mode."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.stack import ROOT, TEST_SECRET_KEYS, base_env

PRINT_DATABASE = (
    "import django, json; django.setup(); from django.conf import settings; "
    "db = settings.DATABASES['default']; "
    "print(json.dumps({k: db.get(k) for k in ('ENGINE', 'CONN_MAX_AGE', 'CONN_HEALTH_CHECKS', 'OPTIONS')}))"
)
DISTRIBUTED = {"DATABASE_URL": "postgres://u@127.0.0.1:5432/x", "REDIS_URL": "redis://127.0.0.1:6379/3",
               "DJANGO_SECRET_KEY": "s" * 40, "CHATFORGE_SECRET_KEYS": TEST_SECRET_KEYS}


def database_settings(**env: str) -> dict:
    result = subprocess.run([sys.executable, "-c", PRINT_DATABASE], cwd=ROOT, env=base_env(**env),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def refusal(**env: str) -> str:
    result = subprocess.run([sys.executable, "-c", PRINT_DATABASE], cwd=ROOT, env=base_env(**env),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    return result.stderr


def test_distributed_mode_pools_connections_by_default():
    db = database_settings(**DISTRIBUTED)
    assert db["CONN_MAX_AGE"] == 0  # Django refuses persistent connections with a pool
    assert db["CONN_HEALTH_CHECKS"] is True  # connections idle across a restart are replaced on borrow
    pool = db["OPTIONS"]["pool"]
    assert (pool["min_size"], pool["max_size"], pool["timeout"]) == (1, 10, 10.0)
    assert pool["reconnect_timeout"] == pool["timeout"]
    assert db["ENGINE"] == "chatforge.db.postgresql"  # its pool skips the check of a connection just given back


def test_pool_sizes_come_from_the_environment():
    db = database_settings(**DISTRIBUTED, DATABASE_POOL_MIN_SIZE="0", DATABASE_POOL_MAX_SIZE="3",
                           DATABASE_POOL_TIMEOUT_S="2.5")
    pool = db["OPTIONS"]["pool"]
    assert (pool["min_size"], pool["max_size"], pool["timeout"], pool["reconnect_timeout"]) == (0, 3, 2.5, 2.5)


def test_without_the_pool_connections_persist_as_before():
    db = database_settings(**DISTRIBUTED, DATABASE_POOL="false", DATABASE_CONN_MAX_AGE="30")
    assert db["ENGINE"] == "django.db.backends.postgresql"  # ours only changes the pool
    assert "pool" not in db["OPTIONS"]
    assert db["CONN_MAX_AGE"] == 30
    assert db["CONN_HEALTH_CHECKS"] is False


def test_impossible_pool_sizes_are_refused_at_start():
    sizes = {"min_over_max": ("5", "2"), "no_connection": ("0", "0")}
    for low, high in sizes.values():
        assert "DATABASE_POOL_MAX_SIZE" in refusal(**DISTRIBUTED, DATABASE_POOL_MIN_SIZE=low,
                                                    DATABASE_POOL_MAX_SIZE=high)
    assert "DATABASE_POOL_TIMEOUT_S" in refusal(**DISTRIBUTED, DATABASE_POOL_TIMEOUT_S="0")


def test_embedded_mode_has_no_pool():
    db = database_settings()
    assert db["ENGINE"] == "django.db.backends.sqlite3"
    assert "pool" not in db["OPTIONS"]


def test_sessions_of_a_vanished_host_are_ended_by_postgres():
    """Per-session timeouts and keepalives (a host cut off mid-transaction
    would hold its row locks for hours): on with and without the pool."""
    for pool in ("true", "false"):
        options = database_settings(**DISTRIBUTED, DATABASE_POOL=pool)["OPTIONS"]
        assert "-c idle_in_transaction_session_timeout=60000" in options["options"]
        assert "-c tcp_user_timeout=30000" in options["options"] and "-c tcp_keepalives_idle=10" in options["options"]
        assert (options["keepalives"], options["keepalives_idle"], options["tcp_user_timeout"]) == (1, 10, 30000)
    options = database_settings(**DISTRIBUTED, DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_S="0",
                                DATABASE_DEAD_PEER_TIMEOUT_S="0")["OPTIONS"]
    assert "options" not in options and "keepalives" not in options  # left to the server and the system


def test_fixed_statements_are_prepared_unless_turned_off():
    # Django turns psycopg's prepared statements off; the threshold turns them
    # on for what asks (chatforge/db/sql_rows.py), never reached otherwise.
    assert database_settings(**DISTRIBUTED)["OPTIONS"]["prepare_threshold"] >= 1_000_000
    off = database_settings(**DISTRIBUTED, DATABASE_PREPARED_STATEMENTS="false")
    assert "prepare_threshold" not in off["OPTIONS"]
