"""Giving a thread's database connection back while a step waits.

With a connection pool (``DATABASES[...]["OPTIONS"]["pool"]``), Django's
``connection.close()`` returns the connection to the pool rather than
closing it, and the next query borrows one again. A step that is about to
wait on the network (a model streaming for seconds) releases its connection
first, so the number of connections a worker needs follows the number of
statements in flight, not the number of runs in flight. Without a pool
(SQLite in embedded mode, or pooling switched off) closing would only cost
a reconnect, so nothing is done.
"""

from __future__ import annotations

from django.db import connection


def release_connection() -> None:
    if connection.in_atomic_block:
        return  # inside a transaction the connection is still in use
    if not connection.settings_dict.get("OPTIONS", {}).get("pool"):
        return
    connection.close()
