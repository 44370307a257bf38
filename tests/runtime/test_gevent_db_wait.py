"""psycopg's cooperative wait for gevent workers (chatforge/workers/gevent_db_wait.py),
run in a gevent-patched process against the test Postgres."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from chatforge.workers import gevent_db_wait

PROBE = "tests.runtime.gevent_db_wait_probe"
ROOT = Path(__file__).resolve().parents[2]


def _conninfo() -> str:
    db = settings.DATABASES["default"]
    return f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT']}/postgres"


@pytest.fixture(scope="module")
def found() -> dict:
    done = subprocess.run([sys.executable, "-m", PROBE, _conninfo()], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_installed_where_gevent_patched_select(found):
    assert found["installed"] is True
    assert found["wait"] == "wait_cooperatively"


def test_statements_pipelines_and_server_errors_work_through_it(found):
    assert found["select"] == 2
    assert found["pipeline"] == [1, 2, 3]
    assert found["rows"] == 50
    assert found["server_error"] == "DivisionByZero"


def test_other_greenlets_run_while_a_statement_waits_on_the_server(found):
    assert found["slept_s"] >= 0.3
    # A ticker every 10 ms: a blocking wait would have let it tick at most once.
    assert found["ticks_while_waiting"] >= 10


def test_readiness_interval_deadline_and_a_closed_socket(found):
    assert found["writable"] & 2  # Ready.W
    assert found["readable"] is True
    assert found["timed_out_after_s"] == 0.2
    assert found["closed"] == "connection socket closed"


def test_not_installed_without_gevent():
    import psycopg.waiting

    before = psycopg.waiting.wait
    assert gevent_db_wait.install() is False
    assert psycopg.waiting.wait is before
