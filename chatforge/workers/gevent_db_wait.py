"""psycopg's wait in a gevent worker: the operating system first, the hub only when it must.

psycopg runs each statement as a generator that yields "wait until the
socket is readable / writable / either" and the connection's wait function
drives it. In a process where gevent has patched ``select`` (the LLM
worker), psycopg chooses ``wait_poll`` on gevent's ``poll``, which builds a
watcher for every wait and parks the greenlet on the hub even when the
socket is ready already — as it nearly always is for writing, and a
pipeline (the history's reads, finalize's lock and reads) waits to write
once per statement. Measured in a gevent process against Postgres on
loopback, a pipeline of three SELECTs followed by one more query: 297–311
µs of CPU through gevent's poll, 201–213 µs with this wait (one greenlet;
246–259 against 170–177 µs with 30 at once), and the wall time fell alike.

``wait_cooperatively`` asks the operating system's own ``poll`` with a zero
timeout first (one system call, no hub); only a socket that is not ready
parks the greenlet on one watcher of the hub, so other greenlets run while
the server works. It keeps ``wait_poll``'s contract: it wakes at least
every ``interval`` seconds, raises psycopg's ``_WaitTimeout`` past
``timeout``, and a socket that reports only an error raises
``OperationalError``.

Installed by a gevent worker at start (``orchestration/worker_warmup.py``);
psycopg looks its wait function up on ``psycopg.waiting`` at every wait
(``Connection.wait``), so replacing it there is enough. Nothing changes in
other processes: psycopg's C wait is used where ``select`` is not patched.
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable
from typing import Any, TypeVar

from psycopg import errors
from psycopg.abc import PQGen
from psycopg.waiting import Ready, Wait

from chatforge.workers.unpatched_poll import unpatched_poll

RV = TypeVar("RV")
WaitFunc = Callable[..., Any]

_EVENTS = {Wait.R: select.POLLIN, Wait.W: select.POLLOUT, Wait.RW: select.POLLIN | select.POLLOUT}
_ONLY_AN_ERROR = select.POLLERR | select.POLLHUP | select.POLLNVAL


class _WokeUp(Exception):
    """The hub's wait ended at its timeout: look again (``interval``)."""


def _ready(events: list[tuple[int, int]]) -> int:
    """psycopg's ``Ready`` flags from one ``poll`` result (0: not ready)."""
    if not events:
        return 0
    flags = events[0][1]
    ready = (Ready.R if flags & select.POLLIN else 0) | (Ready.W if flags & select.POLLOUT else 0)
    if not ready and flags & _ONLY_AN_ERROR:
        raise errors.OperationalError("connection socket closed")
    return ready


def cooperative_wait(os_poll: Callable[[], Any], hub_waits: dict[Wait, Callable[..., None]]) -> WaitFunc:
    """The wait function, over the operating system's ``poll`` and gevent's
    per-event waits (``wait_read``, ``wait_write``, ``wait_readwrite``)."""

    def wait_cooperatively(
        gen: PQGen[RV], fileno: int, interval: float = 0.0, timeout: float | None = None
    ) -> RV:
        deadline = time.monotonic() + timeout if timeout is not None else None
        poller = os_poll()
        try:
            state = next(gen)
            poller.register(fileno, _EVENTS[state])
            while True:
                ready = _ready(poller.poll(0))
                if not ready:
                    limit = interval if interval > 0 else None
                    if deadline is not None:
                        left = max(0.0, deadline - time.monotonic())
                        limit = left if limit is None else min(limit, left)
                    try:
                        hub_waits[state](fileno, timeout=limit, timeout_exc=_WokeUp)
                    except _WokeUp:
                        pass
                    ready = _ready(poller.poll(0))
                state = gen.send(ready)
                poller.modify(fileno, _EVENTS[state])
                if deadline is not None and time.monotonic() >= deadline:
                    raise errors._WaitTimeout("wait timeout expired")
        except StopIteration as finished:
            return finished.value

    return wait_cooperatively


def install() -> bool:
    """Give psycopg the cooperative wait if gevent has patched ``select``
    in this process; whether it was installed."""
    os_poll = unpatched_poll()
    if os_poll is None:
        return False
    import psycopg.waiting
    from gevent.socket import wait_read, wait_readwrite, wait_write

    psycopg.waiting.wait = cooperative_wait(
        os_poll, {Wait.R: wait_read, Wait.W: wait_write, Wait.RW: wait_readwrite}
    )
    return True
