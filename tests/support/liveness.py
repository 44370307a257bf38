"""A liveness registry (chatforge/workers/liveness.py) on a redis-server of
the test's own, emptied and past the first seconds in which a watcher
trusts nobody's loss (orchestration/services/lost_workers.py)."""

from __future__ import annotations

from chatforge.workers.liveness import LivenessRegistry
from tests.support.private_services import PrivateRedis
from tests.support.stack import wait_for


def fresh_registry(server: PrivateRedis, *, lost_s: float, interval_s: float) -> LivenessRegistry:
    client = server.client()
    client.flushdb()
    registry = LivenessRegistry(client, lost_s=lost_s, interval_s=interval_s)
    wait_for(lambda: registry.settled_for(lost_s + 2 * interval_s), timeout=10, what="the redis-server to settle")
    return registry


def wait_until_late(registry: LivenessRegistry, owner: str, *, renewing: str) -> None:
    """Wait until ``owner`` is late while ``renewing`` renews all along
    (and is never late itself)."""
    def late() -> bool:
        registry.renew(renewing)
        found = registry.lapsed()
        assert renewing not in found
        return owner in found

    wait_for(late, timeout=10, what=f"{owner} to be late")
