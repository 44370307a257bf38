"""The HTTP pool's check of its idle connections, without gevent's hub.

Before a kept connection is lent again, and each time a request joins or
leaves the pool, httpcore walks the pool and asks of every idle connection
"is its socket readable?" (an idle socket with something to read is one the
server closed). It asks with ``select.poll()`` and a zero timeout. In the
gevent worker ``select`` is gevent's, whose ``poll`` builds a watcher and
goes through the hub even for a zero timeout: 18 µs per check against
1.3 µs for the system call (measured here). The pool holds as many
connections as the worker has had turns streaming at once, so at the
benchmark's saturation this walk was 12 % of the LLM worker's CPU (py-spy;
docs/performance.md).

A zero-timeout poll never blocks, so the cooperative version buys nothing
there: in a process where gevent has patched ``select``, the sync backends
of httpcore (the Ollama and Gemini adapters' httpx) and httpcore2 (the
OpenAI and Anthropic SDKs' httpx2) ask the operating system's ``poll``
directly. Elsewhere nothing changes. Everything else about the pool — what
counts as expired, when a connection is closed — stays the library's.
"""

from __future__ import annotations

import importlib
import logging
import select
import socket
from collections.abc import Callable
from typing import Any

from chatforge.workers.unpatched_poll import unpatched_poll

logger = logging.getLogger(__name__)

SYNC_BACKENDS = ("httpcore._backends.sync", "httpcore2._backends.sync")


def readable_probe(poll: Callable[[], Any]) -> Callable[[socket.socket | None], bool]:
    """httpcore's ``is_socket_readable`` on the given ``poll``: a socket
    that is gone counts as readable (its next read is the end), as there."""

    def is_socket_readable(sock: socket.socket | None) -> bool:
        fileno = -1 if sock is None else sock.fileno()
        if fileno < 0:
            return True
        probe = poll()
        probe.register(fileno, select.POLLIN)
        return bool(probe.poll(0))

    return is_socket_readable


def install() -> list[str]:
    """Give the sync backends the direct probe if gevent patched ``select``;
    the backends changed (none where it is not patched)."""
    poll = unpatched_poll()
    if poll is None:
        return []
    probe = readable_probe(poll)
    installed = []
    for name in SYNC_BACKENDS:
        try:
            backend = importlib.import_module(name)
        except ImportError:
            continue
        if not callable(getattr(backend, "is_socket_readable", None)):
            # A release that moved the check: the library's own stays (correct, only slower).
            logger.warning("%s has no is_socket_readable; its idle-connection check stays gevent's", name)
            continue
        backend.is_socket_readable = probe
        installed.append(name)
    return installed
