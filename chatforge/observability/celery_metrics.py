"""Celery signals for observability: how long a task waited in its queue
(its publisher stamps the time in a header; the worker that starts it
observes the difference), the worker's metrics server, and tracing set up
in each process that runs tasks."""

from __future__ import annotations

import time
from typing import Any

from celery.signals import before_task_publish, task_prerun, worker_init, worker_process_init, worker_ready

from . import metrics
from .exposition import serve_worker_metrics
from .tracing import configure_tracing

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


@worker_process_init.connect
def _trace_prefork_child(**_: Any) -> None:
    # A prefork child: its exporter's thread must start after the fork.
    configure_tracing("chatforge-worker")


@worker_init.connect
def _trace_worker(sender: Any = None, **_: Any) -> None:
    # The pool as named (-P) at this point: gevent, threads, solo run tasks in this process.
    if "prefork" not in str(getattr(sender, "pool_cls", "prefork")):
        configure_tracing("chatforge-worker")
