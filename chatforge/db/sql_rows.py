"""Model instances from hand-written SQL, for the engine's hot reads.

The ORM compiles every queryset anew: for the reads a step makes on every
turn (the conversation's messages with their runs, a run's ledger, the
finalize lock) compiling cost more CPU than the statement itself
(docs/performance.md). These helpers run a fixed SQL text and build the
same model instances the ORM would, with each field's own conversions
(JSON text → Python, SQLite's text → datetime and UUID), so callers cannot
tell the difference. The SQL must be portable (Postgres and SQLite) unless
the caller picks by ``connection.vendor``.

On Postgres these statements are also prepared on the server
(``fixed_sql_cursor``): planning the engine's joined statements cost more
than running them (the turn's claim: 1.0–2.8 ms of planning against
0.2–0.7 ms of execution, from ``pg_stat_statements``), and a prepared
statement is planned once per connection.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.utils import CursorWrapper
from django.db.models import Field, Model

M = TypeVar("M", bound=Model)


def fixed_sql_cursor() -> CursorWrapper:
    """A cursor for fixed SQL texts the engine sends on every step: on
    Postgres its statements are bound and prepared on the server at their
    first execution on a connection, so each is parsed and planned once per
    pooled connection instead of every time (Postgres replans a prepared
    statement only while its custom plans look cheaper than the generic
    one, and after schema changes). Placeholders and parameters are as
    with ``connection.cursor()``. ``DATABASE_PREPARED_STATEMENTS=false``
    turns it off (a transaction-mode PgBouncer older than 1.21 cannot keep
    prepared statements across transactions)."""
    if connection.vendor != "postgresql" or not getattr(settings, "DATABASE_PREPARED_STATEMENTS", False):
        return connection.cursor()
    connection.ensure_connection()
    cursor_class = _preparing_cursor_classes()[connection.queries_logged]
    with connection.wrap_database_errors:
        # Django's own wrapping (query logging, error translation, the
        # thread check) around a server-binding cursor of the same connection.
        return connection._prepare_cursor(cursor_class(connection.connection))


@functools.cache
def _preparing_cursor_classes() -> dict[bool, type]:
    """The cursor classes, by whether Django logs the queries."""
    from django.db.backends.postgresql.base import ServerBindingCursor

    class PreparingCursor(ServerBindingCursor):
        """Prepares every statement it executes (psycopg keeps the names
        per connection, up to ``prepared_max``, and reuses them)."""

        def execute(self, query, params=None, *, prepare=None, binary=None):
            return super().execute(query, params, prepare=True if prepare is None else prepare, binary=binary)

    class LoggedPreparingCursor(PreparingCursor):
        """For Django's query log (DEBUG, ``CaptureQueriesContext``), which
        reads the statement from ``cursor._query.query``: psycopg leaves it
        unset after a prepared execution, so it is set here, with the
        parameters inlined as the ORM's client-side cursors show them."""

        def execute(self, query, params=None, *, prepare=None, binary=None):
            result = super().execute(query, params, prepare=prepare, binary=binary)
            self._query = _Shown(connection.ops.compose_sql(query, params))
            return result

    return {False: PreparingCursor, True: LoggedPreparingCursor}


class _Shown:
    """What Django's query log reads of a psycopg cursor: ``_query.query``."""

    def __init__(self, text: str) -> None:
        self.query = text.encode()


def columns(model: type[Model], alias: str) -> str:
    """The model's concrete columns under ``alias``, in field order (the
    order ``load`` expects them in)."""
    return ", ".join(f'{alias}."{field.column}"' for field in model._meta.concrete_fields)


def db_param(model: type[Model], field_name: str, value: Any) -> Any:
    """``value`` as the database stores ``field_name`` (a UUID is text on
    SQLite): raw SQL gets no such help from the ORM."""
    field: Field = model._meta.pk if field_name == "pk" else model._meta.get_field(field_name)
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


def as_uuid(value: Any) -> UUID | None:
    """A UUID column as the cursor returned it (text on SQLite)."""
    return value if value is None or isinstance(value, UUID) else UUID(value)


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


def fetch(model: type[M] | None, sql: str, params: Sequence | dict) -> list[tuple[M, tuple]]:
    """Rows of ``sql``, whose select list starts with ``columns(model, …)``:
    each as the model instance and the row's further values."""
    with fixed_sql_cursor() as cursor:
        cursor.execute(sql, params)
        return _loaded(model, cursor.fetchall())


def _loaded(model: type[M] | None, rows: Sequence[Sequence]) -> list[tuple[M, tuple]]:
    if model is None:
        return [(None, tuple(row)) for row in rows]
    width = len(model._meta.concrete_fields)
    return [(load(model, row[:width]), tuple(row[width:])) for row in rows]


@dataclass(frozen=True)
class Read:
    """``fetch``'s arguments, for reads made together (``fetch_together``).
    With no ``model`` the rows come back as they are (a write's
    ``RETURNING``, sent in the same round trip as the reads after it)."""

    model: type[Model] | None
    sql: str
    params: Sequence | dict

    def fetch(self) -> list[tuple[Any, tuple]]:
        return fetch(self.model, self.sql, self.params)


def fetch_together(*reads: Read) -> list[list[tuple[Any, tuple]]]:
    """``fetch`` of each read, in order, in one round trip on Postgres.

    A step's reads that do not depend on each other (a turn's history: the
    conversation, the run's turns and its tool calls) each waited for the
    one before. In psycopg's pipeline mode every statement is sent before
    any result is read, so they cost one round trip, and they run in one
    implicit transaction (one snapshot) where no transaction is open.
    Elsewhere (SQLite) they are read one by one."""
    if connection.vendor != "postgresql":
        return [read.fetch() for read in reads]
    connection.ensure_connection()
    cursors: list[CursorWrapper] = []
    # Errors raised when the pipeline ends (its results are read there) are
    # Django's, as for any other statement: the tasks retry OperationalError.
    with connection.wrap_database_errors, connection.connection.pipeline():
        try:
            for read in reads:
                cursors.append(fixed_sql_cursor())
                cursors[-1].execute(read.sql, read.params)
            results = [cursor.fetchall() for cursor in cursors]
        finally:
            for cursor in cursors:
                cursor.close()
    return [_loaded(read.model, rows) for read, rows in zip(reads, results, strict=True)]


def fetch_models(model: type[M], sql: str, params: Sequence | dict) -> list[M]:
    """Model instances of ``sql``, whose select list is ``columns(model, …)``."""
    return instances(fetch(model, sql, params))


def instances(rows: Sequence[tuple[M, tuple]]) -> list[M]:
    """The model instances of ``fetch``'s rows."""
    return [instance for instance, _ in rows]


def _generated_pk(instance: Model) -> bool:
    """Whether the database picks the instance's primary key (an unset auto field)."""
    pk = instance._meta.pk
    return pk.get_internal_type() in {"AutoField", "BigAutoField", "SmallAutoField"} and instance.pk is None


def insert_statement(instance: Model) -> tuple[str, list]:
    """``INSERT`` of a new, unsaved ``instance`` as the ORM would write it
    (defaults and ``auto_now_add`` applied, values prepared for the
    backend), to be sent on its own or chained with others in one
    statement. An auto primary key is left to the database and returned."""
    fields = [field for field in instance._meta.concrete_fields
              if not (field.primary_key and _generated_pk(instance))]
    params = [field.get_db_prep_save(field.pre_save(instance, True), connection) for field in fields]
    names = ", ".join(f'"{field.column}"' for field in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    sql = f"INSERT INTO {instance._meta.db_table} ({names}) VALUES ({placeholders})"
    if _generated_pk(instance):
        sql += f' RETURNING "{instance._meta.pk.column}"'
    return sql, params


def insert_select_statement(instance: Model, expressions: dict[str, tuple[str, list]], *,
                            source: str) -> tuple[str, list]:
    """``INSERT … SELECT`` of a new ``instance`` as ``insert_statement``
    writes it, except the fields named in ``expressions`` (name → SQL and
    its parameters), computed from ``source`` (the FROM clause, its filter
    included): a row inserted only when, and as, another part of the same
    statement decides. No ``RETURNING``: the caller adds what it needs."""
    fields = [field for field in instance._meta.concrete_fields
              if not (field.primary_key and _generated_pk(instance))]
    selected, params = [], []
    for field in fields:
        if field.name in expressions:
            sql, expression_params = expressions[field.name]
            selected.append(sql)
            params.extend(expression_params)
        else:
            selected.append("%s")
            params.append(field.get_db_prep_save(field.pre_save(instance, True), connection))
    names = ", ".join(f'"{field.column}"' for field in fields)
    sql = f"INSERT INTO {instance._meta.db_table} ({names}) SELECT {', '.join(selected)} FROM {source}"
    return sql, params


def set_clause(model: type[Model], values: dict[str, Any]) -> tuple[str, list]:
    """The ``SET`` list of an ``UPDATE`` of the given fields, with their
    values prepared as the ORM would."""
    meta = model._meta
    assignments, params = [], []
    for name, value in values.items():
        field = meta.get_field(name)
        assignments.append(f'"{field.column}" = %s')
        params.append(field.get_db_prep_save(value, connection))
    return ", ".join(assignments), params


def mark_saved(instances: Sequence[Model]) -> None:
    """What ``save()`` leaves on an instance it inserted."""
    for instance in instances:
        instance._state.adding = False
        instance._state.db = DEFAULT_DB_ALIAS


def insert_all(*instances: Model) -> None:
    """Insert new instances in order, as ``save()`` would: one statement on
    Postgres (``write_together``). Only the last may leave its primary key
    to the database."""
    if any(_generated_pk(instance) for instance in instances[:-1]):
        raise ValueError("only the last instance may have its primary key generated")
    with fixed_sql_cursor() as cursor:
        _chained(cursor, [insert_statement(instance) for instance in instances])
        if _generated_pk(instances[-1]):
            instances[-1].pk = cursor.fetchone()[0]
    mark_saved(instances)


def write_together(*statements: tuple[str, list]) -> None:
    """Writes whose results are not needed (``insert_statement``,
    ``update_statement``), in one round trip: one statement on Postgres,
    chained as data-modifying CTEs (foreign keys are checked at commit; no
    two may change the same row), one each elsewhere."""
    with fixed_sql_cursor() as cursor:
        _chained(cursor, list(statements))


def _chained(cursor: CursorWrapper, statements: list[tuple[str, list]]) -> None:
    if connection.vendor == "postgresql" and len(statements) > 1:
        *first, last = statements
        chained = ", ".join(f"i{n} AS ({sql})" for n, (sql, _) in enumerate(first))
        cursor.execute(f"WITH {chained} {last[0]}", [p for _, params in statements for p in params])
    else:
        for sql, params in statements:
            cursor.execute(sql, params)


def insert_rows(instances: Sequence[Model]) -> None:
    """New instances of one model in one multi-row ``INSERT`` (what
    ``bulk_create`` sends, without compiling a query); primary keys the
    database picks are set from ``RETURNING``, in order, as ``bulk_create``
    does on Postgres."""
    if not instances:
        return
    statements = [insert_statement(instance) for instance in instances]
    first_sql = statements[0][0]
    head, _, rest = first_sql.partition(" VALUES ")
    row, _, returning = rest.partition(" RETURNING ")
    sql = f"{head} VALUES {', '.join([row] * len(statements))}" + (f" RETURNING {returning}" if returning else "")
    with fixed_sql_cursor() as cursor:
        cursor.execute(sql, [p for _, params in statements for p in params])
        if returning:
            for instance, (pk,) in zip(instances, cursor.fetchall(), strict=True):
                instance.pk = pk
    mark_saved(instances)


def update_statement(model: type[Model], values: dict[str, Any], **where: Any) -> tuple[str, list]:
    """``UPDATE`` of the given fields (values prepared as the ORM would) of
    the rows whose fields equal ``where`` (``pk`` names the primary key)."""
    meta = model._meta
    assignments, params = set_clause(model, values)
    conditions = []
    for name, value in where.items():
        field = meta.pk if name == "pk" else meta.get_field(name)
        conditions.append(f'"{field.column}" = %s')
        params.append(field.get_db_prep_value(value, connection))
    return f'UPDATE {meta.db_table} SET {assignments} WHERE {" AND ".join(conditions)}', params


def update_where(model: type[Model], values: dict[str, Any], **where: Any) -> int:
    """``update_statement`` sent; the number of rows changed.
    ``QuerySet.update`` without the compiling."""
    with fixed_sql_cursor() as cursor:
        cursor.execute(*update_statement(model, values, **where))
        return cursor.rowcount
