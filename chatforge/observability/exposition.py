"""Serving the metrics: ``/metrics`` on the web process, and a small HTTP
server on each worker's port (CHATFORGE_WORKER_METRICS_PORT).

Where PROMETHEUS_MULTIPROC_DIR is set (a prefork worker, or several web
processes behind one port), the values of every process writing there are
combined at each scrape; otherwise this process's own registry is served.
"""

from __future__ import annotations

import hmac
import logging
import os
import threading

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest, start_http_server
from prometheus_client import multiprocess

from .metrics import QueueDepthCollector

logger = logging.getLogger(__name__)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


_QUEUE_DEPTH = QueueDepthCollector()
_registered_on_default = False
_register_lock = threading.Lock()


def exposition_registry() -> CollectorRegistry:
    """What a scrape reads: this process's (or, in multiprocess mode, every
    process's) metrics, plus the queue depths read from the broker now."""
    global _registered_on_default
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        registry.register(_QUEUE_DEPTH)
        return registry
    with _register_lock:
        if not _registered_on_default:
            REGISTRY.register(_QUEUE_DEPTH)
            _registered_on_default = True
    return REGISTRY


def metrics_view(request: HttpRequest) -> HttpResponse:
    """``GET /metrics``: with ``Authorization: Bearer <CHATFORGE_METRICS_TOKEN>``,
    or for signed-in staff. With no token configured only staff can read it,
    so a deployment never publishes its metrics by accident."""
    token = settings.CHATFORGE_METRICS_TOKEN
    sent = request.headers.get("Authorization", "")
    allowed = bool(token) and hmac.compare_digest(sent.encode(), f"Bearer {token}".encode())
    if not allowed and not (request.user.is_authenticated and request.user.is_staff):
        message = ("Send 'Authorization: Bearer <CHATFORGE_METRICS_TOKEN>' to read the metrics."
                   if token else "Set CHATFORGE_METRICS_TOKEN on the server and send it as a Bearer token "
                                 "to read the metrics (signed-in staff can read them without).")
        return JsonResponse({"error": {"code": "forbidden", "message": message, "details": {}}}, status=403)
    return HttpResponse(generate_latest(exposition_registry()), content_type=CONTENT_TYPE_LATEST)


def serve_worker_metrics() -> None:
    """Start the worker's metrics server (the main process, once)."""
    port = settings.CHATFORGE_WORKER_METRICS_PORT
    if not port:
        return
    start_http_server(port, addr=settings.CHATFORGE_WORKER_METRICS_ADDR, registry=exposition_registry())
    logger.info("worker metrics on http://%s:%s/metrics", settings.CHATFORGE_WORKER_METRICS_ADDR, port)
