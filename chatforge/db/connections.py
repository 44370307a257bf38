"""When a thread gives its database connection back.

Distributed mode borrows connections from a pool per process
(``chatforge/settings/database.py``); a connection is returned when Django
closes it. That has to happen whenever a unit of work ends, or a thread pins
a connection it no longer uses and the pool runs dry:

- **Celery tasks.** Celery's Django fixup would close every connection
  around every task, but it is turned off (``CELERY_DB_REUSE_MAX`` in
  settings/queues.py): without a pool that meant a new Postgres connection
  per step, 7-10 ms each. Tasks get the lifecycle Django gives requests
  instead, at start and end: a pooled connection goes back to the pool (a
  task never keeps one between tasks, whatever CONN_MAX_AGE says), and an
  unpooled one is kept for CONN_MAX_AGE seconds unless it errored.
- **Requests** return theirs when Django's ``request_finished`` signal closes
  connections (CONN_MAX_AGE is 0 with a pool). A streaming response
  finishes only when its stream ends, minutes later for a run's events, so
  ``ReleaseBeforeStreaming`` returns what the view borrowed before the
  stream starts, and async views reach the database through
  ``db_sync_to_async``, which gives the connection back after each call.
- The heartbeat thread and a model turn waiting on the network release
  theirs themselves (``orchestration/services/heartbeat.py``,
  ``orchestration/services/llm_turns.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from asgiref.sync import SyncToAsync, iscoroutinefunction, markcoroutinefunction, sync_to_async
from celery.signals import task_postrun, task_prerun
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.http import HttpRequest, HttpResponseBase

Response = HttpResponseBase | Awaitable[HttpResponseBase]


def is_pooled(connection: BaseDatabaseWrapper) -> bool:
    return bool(connection.settings_dict.get("OPTIONS", {}).get("pool"))


def release_connections() -> None:
    """Give back this thread's connections: pooled ones to their pool, and
    unpooled ones closed if broken or older than CONN_MAX_AGE (Django's
    end-of-request rule). A connection inside a transaction is left alone."""
    for connection in connections.all(initialized_only=True):
        if connection.in_atomic_block:
            continue
        if is_pooled(connection):
            connection.close()
        else:
            connection.close_if_unusable_or_obsolete()


class db_sync_to_async(SyncToAsync):  # noqa: N801 - used like sync_to_async
    """``sync_to_async`` for database work from async code: the thread's
    connection is given back when the call returns, so an async view or a
    stream that reads the database now and then holds no connection between
    reads. Unlike Channels' ``database_sync_to_async`` it leaves a connection
    inside a transaction alone (``close_old_connections`` would close it)."""

    def thread_handler(self, loop, *args, **kwargs):
        try:
            return super().thread_handler(loop, *args, **kwargs)
        finally:
            release_connections()


@task_prerun.connect(weak=False)
def _before_task(**kwargs) -> None:
    release_connections()


@task_postrun.connect(weak=False)
def _after_task(**kwargs) -> None:
    release_connections()


class ReleaseBeforeStreaming:
    """Middleware: return the view's connections before a streaming body runs.

    Runs in the request's own thread (the thread-sensitive one under ASGI),
    where the view's database work happened."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Response]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest):
        if self.is_async:
            return self.__acall__(request)
        response = self.get_response(request)
        if response.streaming:
            release_connections()
        return response

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        response = await self.get_response(request)
        if response.streaming:
            await sync_to_async(release_connections)()
        return response
