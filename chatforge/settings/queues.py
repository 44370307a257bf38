"""Celery: the broker, queues and the delivery guarantees the run engine relies on.

Read with ``config_from_object(settings, namespace="CELERY")``. The choices
here are the durability rules of the architecture: late acks with redelivery
when a worker dies, one reserved task per process, JSON only, and a
visibility timeout well above the longest hard time limit so a slow step is
not handed to a second worker while the first still runs it.
"""

from __future__ import annotations

from chatforge.env import env

from .mode import EMBEDDED, REDIS_URL

CHATFORGE_TOOL_HARD_TIME_LIMIT_S: int = env.int("CHATFORGE_TOOL_HARD_TIME_LIMIT_S", default=120)
CHATFORGE_LLM_HARD_TIME_LIMIT_S: int = env.int("CHATFORGE_LLM_HARD_TIME_LIMIT_S", default=900)
_LONGEST_HARD_LIMIT = max(CHATFORGE_TOOL_HARD_TIME_LIMIT_S, CHATFORGE_LLM_HARD_TIME_LIMIT_S)

CELERY_BROKER_URL: str = "memory://" if EMBEDDED else REDIS_URL
CELERY_TASK_IGNORE_RESULT = True  # results live in Postgres, not in a result backend
CELERY_RESULT_BACKEND = None
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS: dict = {"visibility_timeout": 2 * _LONGEST_HARD_LIMIT}
if EMBEDDED:
    # The in-memory transport polls its queues (1 s by default); poll often so
    # steps follow each other without a visible pause.
    CELERY_BROKER_TRANSPORT_OPTIONS["polling_interval"] = 0.01
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "chatforge.llm_turn": {"queue": "llm"},
    "chatforge.tool_call": {"queue": "tools"},
    "chatforge.finalize_run": {"queue": "default"},
    "chatforge.sweep_stalled_runs": {"queue": "default"},
}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Keep Celery's Django fixup from closing DB connections around every task;
# chatforge/runtime/db_connections.py applies Django's CONN_MAX_AGE rules instead.
CELERY_DB_REUSE_MAX = 1_000_000
CELERY_BEAT_SCHEDULE = {
    "sweep-stalled-runs": {
        "task": "chatforge.sweep_stalled_runs",
        "schedule": env.float("CHATFORGE_SWEEP_INTERVAL_S", default=60.0),
    },
}

# Embedded mode: how many worker threads run inside the server process.
CHATFORGE_EMBEDDED_WORKER_THREADS: int = env.int("CHATFORGE_EMBEDDED_WORKER_THREADS", default=8)
