"""Run by tests/runtime/test_gevent_db_wait.py in a process of its own, as a
gevent worker runs: monkey-patched first, then the cooperative wait
installed. Prints one JSON line of findings."""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import gevent  # noqa: E402
import psycopg  # noqa: E402
import psycopg.waiting  # noqa: E402
from psycopg import errors  # noqa: E402
from psycopg.waiting import Ready, Wait  # noqa: E402

from chatforge.workers import gevent_db_wait  # noqa: E402

found: dict = {"installed": gevent_db_wait.install()}
found["wait"] = psycopg.waiting.wait.__name__
conninfo = sys.argv[1]

with psycopg.connect(conninfo, autocommit=True) as conn:
    found["select"] = conn.execute("SELECT 1 + 1").fetchone()[0]
    with conn.pipeline():
        cursors = [conn.execute("SELECT %s::int", (n,)) for n in (1, 2, 3)]
    found["pipeline"] = [c.fetchone()[0] for c in cursors]
    with conn.transaction():
        conn.execute("CREATE TEMP TABLE t (n int)")
        conn.cursor().executemany("INSERT INTO t VALUES (%s)", [(n,) for n in range(50)])
    found["rows"] = conn.execute("SELECT count(*) FROM t").fetchone()[0]
    try:
        conn.execute("SELECT 1/0")
    except errors.DivisionByZero:
        found["server_error"] = "DivisionByZero"

    # While one greenlet waits on the server, the others run.
    ticks = []

    def ticker() -> None:
        while True:
            ticks.append(time.monotonic())
            gevent.sleep(0.01)

    other = gevent.spawn(ticker)
    gevent.sleep(0)
    started = time.monotonic()
    conn.execute("SELECT pg_sleep(0.3)")
    found["slept_s"] = round(time.monotonic() - started, 2)
    other.kill()
    found["ticks_while_waiting"] = sum(1 for t in ticks if t > started)


def waits_for(state):
    def gen():
        ready = yield state
        while not ready:  # woken by the interval: ask again
            ready = yield state
        return ready

    return gen()


a, b = socket.socketpair()
wait = psycopg.waiting.wait
# Writable at once; readable once the peer writes (0.05 s later).
found["writable"] = int(wait(waits_for(Wait.W), a.fileno(), interval=0.1))
gevent.spawn_later(0.05, b.send, b"x")
found["readable"] = int(wait(waits_for(Wait.R), a.fileno(), interval=0.02)) == Ready.R
# Nothing comes: the deadline ends the wait.
a.recv(1)
started = time.monotonic()
try:
    wait(waits_for(Wait.R), a.fileno(), interval=0.05, timeout=0.2)
except errors._WaitTimeout:
    found["timed_out_after_s"] = round(time.monotonic() - started, 1)
# A closed file descriptor is not a socket to wait on.
fileno = a.fileno()
a.close()
try:
    wait(waits_for(Wait.R), fileno, interval=0.05)
except errors.OperationalError as exc:
    found["closed"] = str(exc)
b.close()
print(json.dumps(found))
