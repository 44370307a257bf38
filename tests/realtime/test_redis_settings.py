"""Redis settings the websockets depend on.

The event log's connection pool is not redis-py's asyncio default of 100:
a process's waiting sockets share one ``XREAD`` now, but a burst of
resumes reads without waiting, one connection each.

The channel layer's Redis connections outlast its blocking receive.

channels-redis receives with ``BZPOPMIN`` held up to ``brpop_timeout``
seconds; a redis-py socket timeout no longer than that raced it and raised
``TimeoutError`` out of every consumer on the layer (redis-py's default
timeout is 5 s, the same as the block). The event sockets do not use the
layer at all: they keep working when it is unreachable.
"""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels_redis.core import RedisChannelLayer
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db import connections
from django.test import override_settings

from chatforge.conversations.models import Conversation
from chatforge.realtime import close_codes
from chatforge.realtime.routing import websocket_urlpatterns
from tests.realtime.communicator import WebsocketCommunicator


@pytest.mark.asyncio
async def test_the_event_log_pools_are_not_redis_pys_default_of_100():
    from orchestration.event_log.redis_stream import RedisStreamEventLog

    ceiling = settings.CHATFORGE_EVENT_LOG_MAX_CONNECTIONS
    assert ceiling > 100
    log = RedisStreamEventLog(
        url=settings.CHATFORGE_EVENT_LOG_REDIS_URL,
        active_ttl_s=60,
        ended_ttl_s=60,
        max_len=100,
        max_connections=ceiling,
    )
    assert log._client.connection_pool.max_connections == ceiling
    assert log._async_client().connection_pool.max_connections == ceiling


def test_the_socket_timeout_is_longer_than_the_blocking_receive():
    (host,) = settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"]
    assert host["socket_timeout"] > RedisChannelLayer.brpop_timeout
    assert settings.CHANNEL_LAYER_BLOCK_S == RedisChannelLayer.brpop_timeout


@pytest.mark.asyncio
async def test_a_receive_on_an_empty_channel_outlives_a_whole_block():
    layer = get_channel_layer()
    assert isinstance(layer, RedisChannelLayer)
    channel = await layer.new_channel()
    # Two blocks' worth of waiting with nothing to receive: only our own
    # timeout may end it, never redis-py's.
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(layer.receive(channel), RedisChannelLayer.brpop_timeout + 2)
    await layer.flush()


UNREACHABLE_LAYER = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                 "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]}}}


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_event_sockets_work_with_the_channel_layer_unreachable(make_user):
    user, _ = await sync_to_async(make_user)()
    conversation = await sync_to_async(Conversation.objects.create)(user=user)
    with override_settings(CHANNEL_LAYERS=UNREACHABLE_LAYER):
        communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/conversations/{conversation.id}/")
        communicator.scope["user"] = user
        assert (await communicator.connect())[0]
        await communicator.receive_nothing(timeout=0.5)
        await communicator.disconnect()
        refused = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/conversations/{conversation.id}/")
        refused.scope["user"] = AnonymousUser()
        assert await refused.connect() == (False, close_codes.UNAUTHENTICATED)
    await sync_to_async(connections.close_all)()
