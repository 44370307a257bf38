"""The per-run event log: seq-numbered, replayable, shared by every process.

``get_event_log()`` returns the backend configured by ``CHATFORGE_EVENT_LOG``:
one Redis Stream per run (distributed mode) or an in-process log (embedded
mode, where workers are threads of the server process).
"""

from __future__ import annotations

import threading

from django.conf import settings

from .base import EventLog, LogInfo
from .continuity import log_may_start_fresh
from .memory import InMemoryEventLog
from .redis_stream import RedisStreamEventLog

_lock = threading.Lock()
_instance: EventLog | None = None


def get_event_log() -> EventLog:
    """The process's one event log. Built under a lock: in embedded mode a
    socket's reader and a worker thread often ask for the first time at the
    same moment, and two in-memory logs would each see half of a run
    (``functools.lru_cache`` does not prevent that: it may call twice)."""
    global _instance
    if _instance is None:
        with _lock:
            if _instance is None:
                _instance = _build_event_log()
    return _instance


def reset_event_log() -> None:
    """Forget the process's event log (tests that change its settings)."""
    global _instance
    with _lock:
        _instance = None


def _build_event_log() -> EventLog:
    if settings.CHATFORGE_EVENT_LOG == "redis":
        return RedisStreamEventLog(
            url=settings.CHATFORGE_EVENT_LOG_REDIS_URL,
            active_ttl_s=settings.CHATFORGE_EVENTS_ACTIVE_TTL_S,
            ended_ttl_s=settings.CHATFORGE_EVENTS_ENDED_TTL_S,
            max_len=settings.CHATFORGE_EVENTS_MAX_PER_RUN,
            max_connections=settings.CHATFORGE_EVENT_LOG_MAX_CONNECTIONS,
            may_start_fresh=log_may_start_fresh,
        )
    return InMemoryEventLog(may_start_fresh=log_may_start_fresh)


__all__ = ["EventLog", "LogInfo", "get_event_log", "reset_event_log"]
