"""The tool catalog's version: bumped with every change to its rows, read
by every step's claim and every POST that starts a run, so that no worker
or web process uses a catalog older than the last change committed before
the step was claimed or the run's transaction began (decision 0024).

A process caches the catalog it built (``catalog.get_catalog``) and learns
the current version (``note_seen``) for free: the claim statement, and the
statement that locks a POST's conversation, read it beside what they
already return. A process that changes
the catalog itself (the admin, the loader, MCP discovery) rebuilds its own
copy at once: ``bump`` counts the change once it commits (``own_changes``),
which the catalog compares too. ``CHATFORGE_TOOL_CATALOG_TTL_S`` stays as the
bound for what bypasses both (rows changed by hand in SQL).
"""

from __future__ import annotations

import itertools

from django.db import connection, transaction

from .models import CatalogVersion

_seen = 0  # the version this process's latest claim read
_own_changes = 0  # changes this process committed
_count_own = itertools.count(1)


def table() -> str:
    return CatalogVersion._meta.db_table


def bump() -> None:
    """Count one change, in the caller's transaction (an upsert: the row is
    made by the first change), and have this process rebuild its catalog
    once the change has committed."""
    with connection.cursor() as cursor:
        cursor.execute(f"""INSERT INTO {table()} ("id", "value") VALUES (1, 1)
                           ON CONFLICT ("id") DO UPDATE SET "value" = {table()}."value" + 1""")
    transaction.on_commit(_count_own_change)


def bump_on_change(sender: type, **kwargs: object) -> None:
    """``post_save`` / ``post_delete`` receiver of the catalog's models."""
    bump()


def current() -> int:
    """The version, read on its own (embedded mode's claims: SQLite has no
    statement to read it with)."""
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT "value" FROM {table()} WHERE "id" = 1')
        row = cursor.fetchone()
    return row[0] if row else 0


def note_seen(version: int) -> None:
    """A claim read ``version``: a catalog built at another one is stale.
    (Another, not only an older one: a database restored from a backup
    counts from a lower number. Two claims reading across a bump in the
    opposite order cost one extra rebuild at most.)"""
    global _seen
    _seen = version


def seen() -> int:
    return _seen


def own_changes() -> int:
    """How many catalog changes this process has committed: one more means
    its catalog is stale, whatever version the last claim read."""
    return _own_changes


def _count_own_change() -> None:
    global _own_changes
    _own_changes = next(_count_own)
