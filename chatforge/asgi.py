"""ASGI entry point: HTTP goes to Django, websockets to the Channels router.

In embedded mode the Celery worker threads start here, inside the server
process, so any ASGI server gives a working ChatForge with no other process.
"""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatforge.settings")

from chatforge.observability.tracing import configure_tracing  # noqa: E402

# Before the application is built: the Django instrumentation adds its middleware.
configure_tracing("chatforge-web", instrument_django=True)
django.setup(set_prefix=False)  # what get_asgi_application() does before building its handler

from chatforge.serving.asgi_handler import OneHopASGIHandler  # noqa: E402

django_asgi_app = OneHopASGIHandler()

from channels.routing import ProtocolTypeRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from chatforge.realtime.routing import websocket_application  # noqa: E402

if settings.EMBEDDED:
    from orchestration.embedded_worker import start_embedded_worker

    start_embedded_worker()

application = ProtocolTypeRouter({"http": django_asgi_app, "websocket": websocket_application})

from django.urls import get_resolver  # noqa: E402

from chatforge.observability.gc_freeze import prepare_process  # noqa: E402

# The URLconf (and so every view's module) imported now rather than on the
# first request, then what the process holds frozen out of full GC passes.
get_resolver().url_patterns
prepare_process("web")
