"""Django's Postgres backend, whose pool checks a borrowed connection only
when it has sat idle.

With ``CONN_HEALTH_CHECKS`` Django builds its psycopg pool with
``ConnectionPool.check_connection``: an empty query on every borrow, which
cost 0.25–0.36 ms of wall time and 0.17–0.22 ms of CPU each time on the
benchmark's machine (against 0.03 ms for a borrow without it), and a model
turn borrows twice on its path. The check is there for connections left in
the pool across a Postgres restart or a cut link (decision 0010): they are
replaced when borrowed instead of failing a request or a task.

A connection given back less than ``FRESH_S`` ago was working then, and a
Postgres restart takes longer than that, so it is handed out unchecked;
one that sat longer, or was never given back, is checked as before. Under
load nearly every borrow is of a connection just given back. Django builds
its pool inside a property with the check chosen there, so the pool is
built here, as Django builds it, with this check; the wrapper notes when it
gives each connection back. (Not the pool's ``reset`` callback: with one,
psycopg_pool hands every returned connection to a worker thread first.)
"""

from __future__ import annotations

import time
import weakref

from django.db.backends.base.base import NO_DB_ALIAS
from django.db.backends.postgresql import base as postgresql
from psycopg import Connection
from psycopg_pool import ConnectionPool

FRESH_S = 0.5

_given_back_at: weakref.WeakKeyDictionary[Connection, float] = weakref.WeakKeyDictionary()


def note_given_back(conn: Connection) -> None:
    _given_back_at[conn] = time.monotonic()


def check_unless_fresh(conn: Connection) -> None:
    """The pool's ``check``: Django's empty query, unless the connection
    came back less than ``FRESH_S`` ago. Raises if the connection is broken
    (the pool then discards it and hands out another)."""
    given_back = _given_back_at.get(conn)
    if given_back is None or time.monotonic() - given_back >= FRESH_S:
        ConnectionPool.check_connection(conn)


class DatabaseWrapper(postgresql.DatabaseWrapper):
    @property
    def pool(self) -> ConnectionPool | None:
        options = self.settings_dict["OPTIONS"].get("pool")
        if (options and self.alias != NO_DB_ALIAS and self.alias not in self._connection_pools
                and self.settings_dict["CONN_HEALTH_CHECKS"] and not self.settings_dict.get("CONN_MAX_AGE")):
            kwargs = self.get_connection_params()
            kwargs["autocommit"] = True  # as Django's: it sets the connection's mode itself afterwards
            pool = ConnectionPool(kwargs=kwargs, open=False, configure=self._configure_connection,
                                  check=check_unless_fresh, **({} if options is True else options))
            self._connection_pools.setdefault(self.alias, pool)  # as Django's: the first thread's wins
        return super().pool

    def _close(self) -> None:
        if self.connection is not None and self.pool is not None:
            note_given_back(self.connection)  # Django's _close gives it back to the pool
        super()._close()
