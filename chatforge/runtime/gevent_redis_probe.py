"""redis-py's check of a pooled connection, without gevent's hub.

Before it lends a pooled connection, redis-py asks whether its socket holds
unread data (``can_read`` with a zero timeout: ``_socket_can_read`` in
``redis._parsers.hiredis``), by ``select.poll()``. In the gevent worker that
is gevent's ``poll``: a watcher and a trip through the hub for a check that
never waits, before every command of every client there — the event log's,
the cancel watch's, kombu's broker connection. Measured in a gevent process
against Redis on loopback: 108 µs of CPU per ``GET`` with gevent's poll,
80–88 µs with the system call.

In a process where gevent has patched ``select``, a check with a zero
timeout asks the operating system's ``poll``; a check that may wait (a
pubsub ``get_message(timeout=…)``) stays the library's, which waits on the
hub. What counts as readable (buffered TLS bytes, a socket the server
closed) is unchanged.
"""

from __future__ import annotations

import importlib
import select
from collections.abc import Callable
from typing import Any

from chatforge.runtime.unpatched_poll import unpatched_poll

MODULE = "redis._parsers.hiredis"


def direct_can_read(
    poll: Callable[[], Any], cooperative: Callable[[Any, float | None], bool]
) -> Callable[[Any, float | None], bool]:
    """``_socket_can_read`` over ``poll`` for zero timeouts, ``cooperative``
    (the library's own) for any wait."""

    def socket_can_read(sock: Any, timeout: float | None) -> bool:
        if timeout != 0:
            return cooperative(sock, timeout)
        if hasattr(sock, "pending") and sock.pending():
            return True
        probe = poll()
        probe.register(sock, select.POLLIN)
        return bool(probe.poll(0))

    return socket_can_read


def install() -> bool:
    """Install the direct check if gevent patched ``select`` here and the
    installed redis-py still has the function; whether it was installed."""
    poll = unpatched_poll()
    if poll is None:
        return False
    module = importlib.import_module(MODULE)
    library_check = getattr(module, "_socket_can_read", None)
    if not callable(library_check) or getattr(library_check, "__name__", "") != "_socket_can_read":
        return False
    module._socket_can_read = direct_can_read(poll, library_check)
    return True
