"""The Redis transport sends every message of a channel through one client,
and builds a new one when kombu replaces the channel's connection pool.
Against the test Redis, through kombu's own producer and consumer."""

from __future__ import annotations

import uuid

import pytest
import redis
from django.conf import settings
from kombu import Connection

from chatforge.celery import app

pytestmark = pytest.mark.skipif(not settings.REDIS_URL, reason="needs Redis (distributed mode)")

TRANSPORT = "chatforge.workers.broker_transport:Transport"


@pytest.fixture
def connection():
    with Connection(settings.REDIS_URL, transport=TRANSPORT) as conn:
        yield conn


def sent_and_received(conn: Connection, queue_name: str, bodies: list[str]) -> list[str]:
    queue = conn.SimpleQueue(queue_name)
    try:
        for body in bodies:
            queue.put(body)
        return [queue.get(timeout=5).payload for _ in bodies]
    finally:
        queue.clear()
        queue.close()


def test_distributed_mode_sends_through_this_transport():
    assert app.conf.broker_transport == TRANSPORT
    with app.connection_for_write() as conn:
        assert type(conn.default_channel).__module__ == "chatforge.workers.broker_transport"


def test_a_channel_sends_every_message_through_one_client(connection):
    channel = connection.default_channel
    with channel.conn_or_acquire() as first:
        pass
    assert sent_and_received(connection, f"test-{uuid.uuid4().hex}", ["a", "b", "c"]) == ["a", "b", "c"]
    with channel.conn_or_acquire() as again:
        assert again is first
        assert again.connection_pool is channel.pool


def test_a_new_pool_gets_a_new_client_and_sending_goes_on(connection):
    channel = connection.default_channel
    with channel.conn_or_acquire() as before:
        pass
    channel._disconnect_pools()  # what kombu does when the connection is lost
    with channel.conn_or_acquire() as after:
        assert after is not before
        assert after.connection_pool is channel.pool is not before.connection_pool
    assert sent_and_received(connection, f"test-{uuid.uuid4().hex}", ["d"]) == ["d"]


def test_a_client_passed_in_is_used_as_it_is(connection):
    channel = connection.default_channel
    own = channel._create_client()
    with channel.conn_or_acquire(own) as used:
        assert used is own


def test_a_channel_closed_after_its_transport_was_detached_fails_as_a_connection_error():
    """A channel with unacknowledged messages, closed after kombu detached
    its connection's transport (``collect()`` and ``ensure`` do, on a
    broker error) while Redis is down: the close drops the channel's pool,
    then rebuilds one to give the messages back, from the detached
    transport. That raised ``AttributeError: 'NoneType' object has no
    attribute 'hostname'``, not a connection error, and a threads-pool
    worker whose consumer hit it died ("Unrecoverable error", decision
    0011). Now it is a connection error, which closing ignores."""
    from tests.support.private_services import private_redis

    with private_redis() as server:
        conn = Connection(server.url(0), transport=TRANSPORT)
        queue = conn.SimpleQueue(f"unacked-{uuid.uuid4().hex}")
        queue.put("a step")
        assert queue.get(timeout=5).payload == "a step"  # delivered, never acknowledged
        channel = conn.default_channel
        assert channel.qos._delivered

        server.kill()
        conn._do_close_transport()  # what kombu's collect() and ensure() do on a broker error
        with pytest.raises(redis.exceptions.ConnectionError, match="detached"):
            channel._connparams()
        conn.close()  # closes the channel: raised AttributeError before
        assert channel.closed
