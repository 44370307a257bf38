"""The name of the worker running the current step, as the fleet knows it.

Celery's node name (``-n llm@host-a``) names a worker uniquely across hosts,
where the machine's hostname may not (containers, network namespaces). Outside
a task (embedded mode's in-process steps, a shell) the machine's hostname.
"""

from __future__ import annotations

import socket

from celery import current_task


def current_worker_name() -> str:
    request = getattr(current_task, "request", None) if current_task else None
    hostname = getattr(request, "hostname", None)
    return (hostname or socket.gethostname())[:255]
