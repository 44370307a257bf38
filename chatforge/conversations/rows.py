"""Model instances from hand-written SQL, for the engine's hot reads.

The ORM compiles every queryset anew: for the reads a step makes on every
turn (the conversation's messages with their runs, a run's ledger, the
finalize lock) compiling cost more CPU than the statement itself
(docs/performance.md). These helpers run a fixed SQL text and build the
same model instances the ORM would, with each field's own conversions
(JSON text → Python, SQLite's text → datetime and UUID), so callers cannot
tell the difference. The SQL must be portable (Postgres and SQLite) unless
the caller picks by ``connection.vendor``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Field, Model

M = TypeVar("M", bound=Model)


def columns(model: type[Model], alias: str) -> str:
    """The model's concrete columns under ``alias``, in field order (the
    order ``load`` expects them in)."""
    return ", ".join(f'{alias}."{field.column}"' for field in model._meta.concrete_fields)


def db_param(model: type[Model], field_name: str, value: Any) -> Any:
    """``value`` as the database stores ``field_name`` (a UUID is text on
    SQLite): raw SQL gets no such help from the ORM."""
    field: Field = model._meta.get_field(field_name)
    return field.get_db_prep_value(value, connection)


@functools.cache
def _plan(model: type[Model], vendor: str) -> tuple[list[str], list[tuple[Any, list]]]:
    """The model's attribute names, and per field its column with the
    conversions the ORM applies to it: the backend's (SQLite's text →
    datetime, UUID, bool) and then the field's own (JSON text → Python).
    The same for every connection of one backend, so built once."""
    table = model._meta.db_table
    real = connections[DEFAULT_DB_ALIAS]
    fields = []
    for field in model._meta.concrete_fields:
        column = field.get_col(table)
        fields.append((column, [*real.ops.get_db_converters(column), *field.get_db_converters(real)]))
    return [f.attname for f in model._meta.concrete_fields], fields


def load(model: type[M], values: Sequence) -> M:
    """A model instance from its columns as the cursor returned them, with
    the conversions applied as the ORM does."""
    real = connections[DEFAULT_DB_ALIAS]
    names, fields = _plan(model, real.vendor)
    converted = []
    for (column, converters), value in zip(fields, values, strict=True):
        for converter in converters:
            value = converter(value, column, real)
        converted.append(value)
    return model.from_db(DEFAULT_DB_ALIAS, names, converted)


def load_next(model: type[M], values: Iterator) -> M:
    """The next ``model`` from a row's iterator of values."""
    return load(model, [next(values) for _ in model._meta.concrete_fields])


def load_optional(model: type[M], values: Iterator) -> M | None:
    """The next ``model`` from ``values``; None when a LEFT JOIN found none."""
    found = [next(values) for _ in model._meta.concrete_fields]
    return None if found[0] is None else load(model, found)


def fetch(model: type[M], sql: str, params: Sequence | dict) -> list[tuple[M, tuple]]:
    """Rows of ``sql``, whose select list starts with ``columns(model, …)``:
    each as the model instance and the row's further values."""
    width = len(model._meta.concrete_fields)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [(load(model, row[:width]), tuple(row[width:])) for row in rows]


def fetch_models(model: type[M], sql: str, params: Sequence | dict) -> list[M]:
    """Model instances of ``sql``, whose select list is ``columns(model, …)``."""
    return [instance for instance, _ in fetch(model, sql, params)]
