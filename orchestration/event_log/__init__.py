"""The per-run event log: seq-numbered, replayable, shared by every process.

``get_event_log()`` returns the backend configured by ``CHATFORGE_EVENT_LOG``:
one Redis Stream per run (distributed mode) or an in-process log (embedded
mode, where workers are threads of the server process).
"""

from __future__ import annotations

from functools import lru_cache

from django.conf import settings

from .base import EventLog, LogInfo
from .continuity import log_may_start_fresh


@lru_cache(maxsize=1)
def get_event_log() -> EventLog:
    if settings.CHATFORGE_EVENT_LOG == "redis":
        from .redis_stream import RedisStreamEventLog

        return RedisStreamEventLog(
            url=settings.CHATFORGE_EVENT_LOG_REDIS_URL,
            active_ttl_s=settings.CHATFORGE_EVENTS_ACTIVE_TTL_S,
            ended_ttl_s=settings.CHATFORGE_EVENTS_ENDED_TTL_S,
            max_len=settings.CHATFORGE_EVENTS_MAX_PER_RUN,
            may_start_fresh=log_may_start_fresh,
        )
    from .memory import InMemoryEventLog

    return InMemoryEventLog(may_start_fresh=log_may_start_fresh)


__all__ = ["EventLog", "LogInfo", "get_event_log"]
