"""Celery: the broker, queues and the delivery guarantees the run engine relies on.

Read with ``config_from_object(settings, namespace="CELERY")``. The choices
here are the durability rules of the architecture: late acks with redelivery
when a worker dies, one reserved task per process, JSON only, and a
visibility timeout well above the longest hard time limit so a slow step is
not handed to a second worker while the first still runs it.
"""

from __future__ import annotations

from chatforge.settings.env import env

from .mode import EMBEDDED, REDIS_URL

CHATFORGE_TOOL_HARD_TIME_LIMIT_S: int = env.int("CHATFORGE_TOOL_HARD_TIME_LIMIT_S", default=120)
CHATFORGE_LLM_HARD_TIME_LIMIT_S: int = env.int("CHATFORGE_LLM_HARD_TIME_LIMIT_S", default=900)
_LONGEST_HARD_LIMIT = max(CHATFORGE_TOOL_HARD_TIME_LIMIT_S, CHATFORGE_LLM_HARD_TIME_LIMIT_S)

# Embedded: kombu's in-process transport. It has no host, but kombu warns "No
# hostname was supplied" on every connection to a URL without one.
CELERY_BROKER_URL: str = "memory://localhost/" if EMBEDDED else REDIS_URL
# Kombu's Redis transport, reusing one client per channel for sending
# (chatforge/workers/broker_transport.py). Plain redis:// only: TLS and
# Sentinel URLs keep kombu's own transports.
CELERY_BROKER_TRANSPORT: str | None = (
    "chatforge.workers.broker_transport:Transport" if CELERY_BROKER_URL.startswith("redis://") else None
)
CELERY_TASK_IGNORE_RESULT = True  # results live in Postgres, not in a result backend
CELERY_RESULT_BACKEND = None
# One (disabled) result backend per process. Celery otherwise builds one per
# thread, and per greenlet in the gevent worker: a new one for every task
# that sends a step and every request that starts a run (2 % of the LLM
# worker's and of the web process' CPU at the benchmark's saturation;
# docs/performance.md).
CELERY_RESULT_BACKEND_THREAD_SAFE = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A lost broker connection (Redis restarting, a failover, a blip) does not
# cancel the steps running: each records itself in Postgres when it ends,
# whatever happened to its message (decision 0011). Cancelling them killed
# every streaming turn and running tool, which then waited for their leases
# to expire, and a side-effecting tool came back "interrupted".
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS: dict = {
    "visibility_timeout": 2 * _LONGEST_HARD_LIMIT,
    # Kombu's Redis pool stops at 10 connections and does not wait for one.
    # The LLM worker's gevent pool acknowledges finished turns from as many
    # greenlets at once: at 10 an ack failed, the consumer counted the broker
    # as lost and cancelled every running turn (bench/load.py, decision 0012).
    "max_connections": 10_000,
}
if EMBEDDED:
    # The in-memory transport polls its queues (1 s by default); poll often so
    # steps follow each other without a visible pause.
    CELERY_BROKER_TRANSPORT_OPTIONS["polling_interval"] = 0.01
CELERY_TASK_DEFAULT_QUEUE = "default"


def _straight_to(queue: str) -> dict:
    """Send to ``queue`` through the anonymous exchange: the message is pushed
    onto the queue's list without reading kombu's binding table
    (``_kombu.binding.<exchange>``), which a FLUSHDB deletes; a send through
    a named exchange whose table is gone vanishes without an error. Celery
    already does this for direct queues; spelled out so that it stays so.
    ``declare=()``: no queue declaration before a send. It only re-adds that
    unused binding, and when its retry reconnects it closes the channel the
    send then uses (kombu's ``Producer._publish``): after a broker restart,
    sends failed with AttributeError (decision 0011)."""
    return {"queue": queue, "exchange": "", "routing_key": queue, "declare": ()}


CELERY_TASK_ROUTES = {
    "chatforge.llm_turn": _straight_to("llm"),
    "chatforge.tool_call": _straight_to("tools"),
    # Calls of tools whose policy says pool="io": a threads pool (decision 0025).
    "chatforge.tool_call_io": _straight_to("tools_io"),
    # Calls of sandboxed tools (the python tool, script tools): the sandbox
    # worker, on hosts with bubblewrap (docs/sandbox.md).
    "chatforge.tool_call_sandbox": _straight_to("sandbox"),
    "chatforge.finalize_run": _straight_to("default"),
    "chatforge.sweep_stalled_runs": _straight_to("default"),
    # A document's text, read after its upload (chatforge/files/tasks.py).
    "chatforge.read_file_text": _straight_to("tools"),
}
# Every queue a task is routed to: the embedded worker consumes them all,
# and /metrics reports the depth of each.
CHATFORGE_QUEUES: list[str] = sorted({route["queue"] for route in CELERY_TASK_ROUTES.values()})
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Keep Celery's Django fixup from closing DB connections around every task;
# chatforge/db/connections.py applies Django's CONN_MAX_AGE rules instead.
CELERY_DB_REUSE_MAX = 1_000_000
# Beat's own producer is made again after a failed send (decision 0011).
CELERY_BEAT_SCHEDULER = "chatforge.workers.broker_guard:ReconnectingScheduler"
CELERY_BEAT_SCHEDULE = {
    "sweep-stalled-runs": {
        "task": "chatforge.sweep_stalled_runs",
        # Each pass: one indexed query for stale runs and one Redis command
        # that notices a broker emptied by a restart or a flush (decision 0011).
        "schedule": env.float("CHATFORGE_SWEEP_INTERVAL_S", default=10.0),
    },
}

# Embedded mode: how many worker threads run inside the server process.
CHATFORGE_EMBEDDED_WORKER_THREADS: int = env.int("CHATFORGE_EMBEDDED_WORKER_THREADS", default=8)
