"""The Celery application. Configuration lives in Django settings (CELERY_*)."""

import os

from chatforge.observability.worker_setup import prepare_worker_metrics_dir

# Before anything imports prometheus-client (docs/observability.md).
prepare_worker_metrics_dir()

from celery import Celery  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatforge.settings")

# GuardedTask: acknowledging a message whose broker connection was lost is
# logged, not raised (chatforge/workers/broker_guard.py, decision 0011).
# Task modules besides the engine's: the reading of documents' text (chatforge/files/tasks.py).
app = Celery(
    "chatforge",
    include=["orchestration.tasks", "chatforge.files.tasks"],
    task_cls="chatforge.workers.broker_guard:GuardedTask",
)
# Django's CELERY_* settings, copied into a plain mapping when Celery first
# reads its configuration (chatforge/workers/celery_config.py).
app.config_from_object("chatforge.workers.celery_config:CELERY", namespace="CELERY")

from chatforge.workers.buffered_task_events import BufferTaskEvents  # noqa: E402

# The gevent worker sends its task events in batches, after the task starts.
app.steps["consumer"].add(BufferTaskEvents)

import chatforge.db.connections  # noqa: E402,F401  (task DB connection lifecycle)
import chatforge.observability.celery_metrics  # noqa: E402,F401  (queue wait, the worker's metrics port)
import chatforge.observability.gc_freeze  # noqa: E402,F401  (start-up objects out of full GC passes)
import chatforge.observability.log_context  # noqa: E402,F401  (task_id, run_id, … on every log line of a task)
import orchestration.worker_liveness  # noqa: E402,F401  (every worker process renews its liveness from its start)
import orchestration.worker_warmup  # noqa: E402,F401  (an LLM worker imports the provider SDKs at start)
