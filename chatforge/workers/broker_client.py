"""A plain Redis client for the broker's database, for what reads or marks
the broker directly (queue depths for the metrics, the broker-loss marker,
fair scheduling's queue lengths) rather than through kombu.

The broker URL is read from the running Celery app's configuration each
time, not from settings: tests point the app at another broker to simulate
its loss (tests/engine/test_infrastructure_failures.py).
"""

from __future__ import annotations

import redis
from celery import current_app

_clients: dict[str, redis.Redis] = {}


def broker_client() -> redis.Redis | None:
    """A client for the broker's Redis database; None for embedded mode's
    in-memory broker, which lives and dies with the process."""
    url = str(current_app.conf.broker_url)
    if not url.startswith(("redis://", "rediss://")):
        return None
    client = _clients.get(url)
    if client is None:
        client = _clients[url] = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    return client
