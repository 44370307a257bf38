"""The Celery application. Configuration lives in Django settings (CELERY_*)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatforge.settings")

# GuardedTask: acknowledging a message whose broker connection was lost is
# logged, not raised (chatforge/runtime/broker_guard.py, decision 0011).
app = Celery("chatforge", include=["orchestration.tasks"], task_cls="chatforge.runtime.broker_guard:GuardedTask")
app.config_from_object("django.conf:settings", namespace="CELERY")

import chatforge.runtime.db_connections  # noqa: E402,F401  (task DB connection lifecycle)
