"""Websocket routes, behind origin checking and authentication, and a guard
that answers a handshake failing on a database or Redis outage with 503."""

from channels.routing import URLRouter
from channels.security.websocket import OriginValidator
from django.conf import settings
from django.urls import path

from .auth import auth_stack
from .consumers import ConversationEventsConsumer, RunEventsConsumer
from .handshake import HandshakeGuard

websocket_urlpatterns = [
    path("ws/runs/<str:run_id>/", RunEventsConsumer.as_asgi()),
    path("ws/conversations/<str:conversation_id>/", ConversationEventsConsumer.as_asgi()),
]


class BrowserOriginValidator(OriginValidator):
    """Refuse cross-site browser pages; allow clients that send no Origin.

    Browsers always send Origin, so cross-site websocket hijacking is stopped
    by checking it against ALLOWED_HOSTS; API clients (SDKs, scripts) send
    none and authenticate with a token instead.
    """

    def valid_origin(self, parsed_origin) -> bool:
        if parsed_origin is None:
            return True
        return super().valid_origin(parsed_origin)


websocket_application = HandshakeGuard(
    BrowserOriginValidator(auth_stack(URLRouter(websocket_urlpatterns)), settings.ALLOWED_HOSTS)
)
