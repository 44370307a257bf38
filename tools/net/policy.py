"""Which otherwise-forbidden destinations tools may reach.

Tools must never reach loopback, private, link-local or metadata addresses.
The one exception is an explicit allow-list of ``host:port`` pairs
(CHATFORGE_TOOLS_ALLOWED_PRIVATE_HOSTS), meant for tests that serve pages
from 127.0.0.1. The engine configures it at start-up from settings; this
package never reads the environment itself.
"""

from __future__ import annotations

_allowed: frozenset[str] = frozenset()


def configure(*, allowed_private_hosts: list[str] | frozenset[str]) -> None:
    global _allowed
    _allowed = frozenset(h.strip().lower() for h in allowed_private_hosts if h.strip())


def allowed_private_hosts() -> frozenset[str]:
    """``host:port`` pairs that may be reached although their address is not public."""
    return _allowed
