"""Websocket routes, behind authentication and the Origin rule (``auth.py``),
and a guard that answers a handshake failing on a database or Redis outage
with 503."""

from channels.routing import URLRouter
from django.urls import path

from .auth import auth_stack
from .consumers import ConversationEventsConsumer, RunEventsConsumer
from .handshake import HandshakeGuard
from .nul_guard import WebsocketNulGuard

websocket_urlpatterns = [
    path("ws/runs/<str:run_id>/", RunEventsConsumer.as_asgi()),
    path("ws/conversations/<str:conversation_id>/", ConversationEventsConsumer.as_asgi()),
]


# WebsocketNulGuard: a NUL in the URL is a 400 and a cookie holding one is
# dropped, before the session is read (chatforge/api/nul_guard.py).
websocket_application = HandshakeGuard(WebsocketNulGuard(auth_stack(URLRouter(websocket_urlpatterns))))
