"""Database connections in Celery workers follow Django's request rules.

Celery's Django fixup closes every connection before and after every task
(unless CELERY_DB_REUSE_MAX is set), so each step of a run would open a new
Postgres connection — measured at 7-10 ms a step here, most of the engine's
overhead. We turn that off (settings/queues.py) and give tasks the lifecycle
Django gives requests instead: ``close_old_connections()`` at task start and
end, which keeps a healthy connection for CONN_MAX_AGE seconds and drops one
that errored or outlived it.
"""

from __future__ import annotations

from celery.signals import task_postrun, task_prerun
from django.db import close_old_connections


@task_prerun.connect(weak=False)
def _before_task(**kwargs) -> None:
    close_old_connections()


@task_postrun.connect(weak=False)
def _after_task(**kwargs) -> None:
    close_old_connections()
