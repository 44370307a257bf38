"""One event log per process, however many threads ask for it first.

In embedded mode the web's socket reader and a worker thread often ask for
the log at the same moment on a fresh server; two in-memory logs would each
hold half of a run (the reader then saw a snapshot instead of run.started).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from django.test import override_settings

import orchestration.event_log as event_log_module
from orchestration.event_log import get_event_log, reset_event_log


def test_threads_asking_at_once_share_one_log(monkeypatch):
    build = event_log_module._build_event_log
    builds = []

    def slow_build():
        builds.append(threading.get_ident())
        time.sleep(0.05)  # widen the window in which a second caller could build too
        return build()

    monkeypatch.setattr(event_log_module, "_build_event_log", slow_build)
    reset_event_log()
    start = threading.Barrier(8)

    def first_call():
        start.wait()
        return get_event_log()

    try:
        with override_settings(CHATFORGE_EVENT_LOG="memory"), ThreadPoolExecutor(8) as pool:
            logs = list(pool.map(lambda _: first_call(), range(8)))
    finally:
        reset_event_log()

    assert len(builds) == 1
    assert all(log is logs[0] for log in logs)
