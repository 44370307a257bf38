"""The Redis transport sends every message of a channel through one client,
and builds a new one when kombu replaces the channel's connection pool.
Against the test Redis, through kombu's own producer and consumer."""

from __future__ import annotations

import uuid

import pytest
from django.conf import settings
from kombu import Connection

from chatforge.celery import app

pytestmark = pytest.mark.skipif(not settings.REDIS_URL, reason="needs Redis (distributed mode)")

TRANSPORT = "chatforge.runtime.broker_transport:Transport"


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
        assert type(conn.default_channel).__module__ == "chatforge.runtime.broker_transport"


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
