"""Kombu's Redis transport, with one Redis client per channel for sending.

Kombu's Redis channel builds a new ``redis.Redis`` for every message it
sends (``Channel.conn_or_acquire`` → ``_create_client``): a task's message,
and each of the worker's task events (received, started, succeeded). The
client is only a front to the channel's connection pool, yet building one
fills a dict of response callbacks; in the LLM worker under the benchmark
that was 6.5 % of the process's CPU (py-spy, docs/performance.md).

This channel keeps the client it built and hands it out again while the
channel's pool is the same one; when kombu replaces the pool (a lost
connection: ``_disconnect_pools``) the next send builds a client on the new
pool, exactly as before. A client over a pool is safe to share between
threads and greenlets: each command borrows a connection from the pool.

A channel whose transport kombu has detached (``Connection.collect()`` and
``ensure`` set ``transport.client = None`` on a broker error) fails to build
a pool with a connection error rather than kombu's ``AttributeError:
'NoneType' object has no attribute 'hostname'``. Closing such a channel
drops its pool and builds another to give its unacknowledged messages back;
the ``AttributeError`` escaped Celery's consumer, which forgives only
connection errors, and a threads-pool worker (the tools_io worker) died of
it when Redis went away with calls in flight (decision 0011). A connection
error is what it is: the broker is gone; the close goes on without the
restore, as it does when Redis refuses it, and the worker reconnects.

Selected by ``CELERY_BROKER_TRANSPORT`` (settings/queues.py) in distributed
mode; the URL stays ``redis://`` and every transport option still applies.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis
from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    _sending_client: redis.Redis | None = None

    @contextmanager
    def conn_or_acquire(self, client: redis.Redis | None = None) -> Iterator[redis.Redis]:
        if client:
            yield client
            return
        pool = self.pool  # builds a new pool if kombu dropped the old one, as _create_client would
        cached = self._sending_client
        if cached is None or cached.connection_pool is not pool:
            cached = self._sending_client = self._create_client()
        yield cached

    def _connparams(self, asynchronous: bool = False) -> dict:
        transport = self.connection
        if transport is not None and transport.client is None:
            raise redis.exceptions.ConnectionError(
                "the broker connection of this channel was closed (kombu detached its transport)")
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel
