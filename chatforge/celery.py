"""The Celery application. Configuration lives in Django settings (CELERY_*)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatforge.settings")

app = Celery("chatforge", include=["orchestration.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")

import chatforge.runtime.db_connections  # noqa: E402,F401  (task DB connection lifecycle)
