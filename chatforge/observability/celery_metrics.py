"""Celery signals for the metrics: how long a task waited in its queue
(its publisher stamps the time in a header; the worker that starts it
observes the difference), and the worker's metrics server."""

from __future__ import annotations

import time
from typing import Any

from celery.signals import before_task_publish, task_prerun, worker_ready

from . import metrics
from .exposition import serve_worker_metrics

SENT_AT_HEADER = "chatforge_sent_at"


@before_task_publish.connect
def _stamp_sent_at(headers: dict[str, Any] | None = None, **_: Any) -> None:
    if headers is not None:
        headers[SENT_AT_HEADER] = time.time()


@task_prerun.connect
def _observe_queue_wait(task: Any = None, **_: Any) -> None:
    request = getattr(task, "request", None)
    sent_at = getattr(request, SENT_AT_HEADER, None) if request is not None else None
    if not isinstance(sent_at, (int, float)):
        return
    queue = ((getattr(request, "delivery_info", None) or {}).get("routing_key")) or "unknown"
    metrics.QUEUE_WAIT.labels(queue=queue).observe(max(0.0, time.time() - sent_at))


@worker_ready.connect
def _serve_metrics(**_: Any) -> None:
    serve_worker_metrics()
