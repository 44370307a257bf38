"""Before a worker or a multi-process web server makes its first metric: a worker that serves metrics
(CHATFORGE_WORKER_METRICS_PORT) counts in a PROMETHEUS_MULTIPROC_DIR, so the
values of its prefork children reach its port.

prometheus-client chooses between in-process and file-backed values when it
is first imported, and the celery command may import it before our code
runs (Flower, a celery command plugin, uses it): so this runs from
``chatforge/celery.py`` before any ChatForge metric exists, reads the
environment directly (no Django settings yet), and has an already imported
prometheus-client choose again for the metrics made from then on.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def is_worker_command(argv: list[str]) -> bool:
    return "worker" in argv[1:]


def prepare_worker_metrics_dir(argv: list[str] | None = None) -> None:
    """A worker that serves metrics counts in a metrics directory."""
    if os.environ.get("CHATFORGE_WORKER_METRICS_PORT") and is_worker_command(argv or sys.argv):
        use_fresh_metrics_dir()


def use_fresh_metrics_dir() -> None:
    """Have the processes started from here (prefork children, uvicorn's
    workers) count in an empty metrics directory: a new one of their own, or
    the operator's, emptied (values left from an earlier run would be summed
    in, so a directory must serve one worker or one web server)."""
    directory = os.environ.get(MULTIPROC_ENV)
    if directory:
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory, exist_ok=True)
    else:
        os.environ[MULTIPROC_ENV] = tempfile.mkdtemp(prefix="chatforge-metrics-")
    values = sys.modules.get("prometheus_client.values")
    if values is not None:
        values.ValueClass = values.get_value_class()
