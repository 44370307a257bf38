"""The operating system's ``select.poll`` in a process where gevent replaced it.

gevent's ``poll`` builds a watcher and goes through the hub even for a
check that must not wait (a zero timeout). The gevent worker's direct
checks — httpcore's idle connections (``providers/idle_connection_probe.py``)
and psycopg's waits (``runtime/gevent_db_wait.py``) — take the system call
from here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def unpatched_poll() -> Callable[[], Any] | None:
    """``select.poll`` as the operating system gives it when gevent has
    patched ``select`` in this process, else None (nothing to replace)."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is None or not monkey.is_module_patched("select"):
        return None
    return monkey.get_original("select", "poll")
