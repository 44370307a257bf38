"""One HTTP client (connection pool, TLS context) per process for each SDK.

Building an SDK client builds an httpx client, and that builds a TLS context
and loads the CA bundle: 5–20 ms of CPU on this project's hosts, paid by
every model turn, since adapters are made per turn (model routes, keys and
base URLs can change between turns). Sharing one HTTP client per process
makes building the SDK client about 0.06 ms, and lets turns to the same
provider reuse open connections. Timeouts stay per adapter: the SDKs send
their own with each request.

Per process, not per import: a prefork child must not share sockets with its
parent, so a client made before a fork is replaced in the child.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TypeVar

Client = TypeVar("Client")

_lock = threading.Lock()
_clients: dict[str, tuple[int, object]] = {}


def shared_http_client(name: str, make: Callable[[], Client]) -> Client:
    """This process's client called ``name``, made with ``make`` the first time."""
    pid = os.getpid()
    with _lock:
        entry = _clients.get(name)
        if entry is None or entry[0] != pid:
            entry = (pid, make())
            _clients[name] = entry
        return entry[1]  # type: ignore[return-value]
