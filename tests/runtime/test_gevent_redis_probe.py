"""redis-py's check of a pooled connection in a gevent worker
(chatforge/runtime/gevent_redis_probe.py), in a gevent-patched process
against the test Redis."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from chatforge.runtime import gevent_redis_probe

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def found() -> dict:
    done = subprocess.run([sys.executable, "-m", "tests.runtime.gevent_redis_probe_run", settings.REDIS_URL],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_installed_once_where_gevent_patched_select(found):
    assert (found["installed"], found["again"], found["check"]) == (True, False, "socket_can_read")


def test_readable_means_data_or_a_closed_peer(found):
    assert found["silent"] is False
    assert found["with_data"] is True
    assert found["peer_closed"] is True


def test_a_check_that_may_wait_still_lets_other_greenlets_run(found):
    assert found["waited"] is False
    assert found["waited_s"] == 0.2
    assert found["ticks_while_waiting"] >= 10


def test_commands_through_a_pool_work(found):
    assert found["read_back"] == ["stored"] * 3


def test_not_installed_without_gevent():
    import redis._parsers.hiredis as hiredis_parser

    before = hiredis_parser._socket_can_read
    assert gevent_redis_probe.install() is False
    assert hiredis_parser._socket_can_read is before
