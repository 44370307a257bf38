"""Every metric ChatForge exports, in one place (their meaning is listed in
docs/observability.md; a test checks the two agree).

Defined with prometheus-client at import. Under PROMETHEUS_MULTIPROC_DIR
(set for prefork workers, whose children each count on their own) the
library writes each process's values to files there and the exposition
sums them (``exposition.py``); gauges then say how to combine processes
(``multiprocess_mode``).

Labels are bounded by configuration, never by traffic: model names and tool
names come from the admin's catalog, routes are URL patterns (not paths),
kinds are small fixed sets.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.conf import settings
from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from redis import RedisError

from chatforge.workers.broker_client import broker_client

# Seconds: a step's overhead is milliseconds, a run can take minutes.
_FAST = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_SLOW = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)

# --- web -------------------------------------------------------------------
HTTP_REQUESTS = Counter(
    "chatforge_http_requests_total", "HTTP requests answered, by method, route pattern and status.",
    ["method", "route", "status"])
HTTP_REQUEST_DURATION = Histogram(
    "chatforge_http_request_duration_seconds",
    "Time to the response's headers (a stream's whole life is not counted), by method and route pattern.",
    ["method", "route"], buckets=_FAST + (5.0, 10.0))
OPEN_STREAMS = Gauge(
    "chatforge_open_streams", "Event streams open now: run and conversation websockets, SSE.",
    ["kind"], multiprocess_mode="livesum")
EVENT_RELAY_LAG = Histogram(
    "chatforge_event_relay_lag_seconds",
    "From an event's publication (its ts) to its send to a live client (events replayed after a "
    "reconnect are not counted).", buckets=_FAST + (5.0,))

# --- engine ----------------------------------------------------------------
RUNS_STARTED = Counter("chatforge_runs_started_total", "Runs accepted, by model.", ["model"])
RUNS_FINISHED = Counter(
    "chatforge_runs_finished_total", "Runs ended, by model and outcome (completed, failed, cancelled).",
    ["model", "outcome"])
RUN_DURATION = Histogram(
    "chatforge_run_duration_seconds", "From the request to the run's end, by outcome.", ["outcome"],
    buckets=_SLOW)
RUN_ITERATIONS = Histogram(
    "chatforge_run_iterations", "Model turns per ended run.", buckets=(1, 2, 3, 4, 5, 7, 10, 15, 20, 30, 50))
ITERATION_CAP_HITS = Counter(
    "chatforge_iteration_cap_hits_total", "Runs that reached their iteration cap (a forced final answer), by model.",
    ["model"])
STEP_OVERHEAD = Histogram(
    "chatforge_step_overhead_seconds",
    "A step's own time outside the model and the tool (claim, history, records, events, enqueueing), by step.",
    ["step"], buckets=_FAST)
QUEUE_WAIT = Histogram(
    "chatforge_queue_wait_seconds", "From a task's publication to its start on a worker, by queue.", ["queue"],
    buckets=_FAST + (5.0, 10.0, 30.0, 60.0))
STEP_REDELIVERIES = Counter(
    "chatforge_step_redeliveries_total",
    "Deliveries of a step beyond the first (its earlier worker died or lost it), by step.", ["step"])
SWEEPER_REDRIVES = Counter(
    "chatforge_sweeper_redrives_total", "Runs whose next step the sweeper sent again, by what it sent.",
    ["action"])
WORKERS_LOST = Counter(
    "chatforge_workers_lost_total",
    "Worker processes declared lost (their liveness lapsed) and the steps they held that were sent on.",
    ["what"])
STEPS_PARKED = Counter(
    "chatforge_steps_parked_total",
    "Steps that waited for a free slot (their user, assistant or tool was at its cap of running steps), by step.",
    ["step"])
STEPS_UNPARKED = Counter(
    "chatforge_steps_unparked_total",
    "Parked steps sent when a slot came free, by who freed it (a step ending, or the sweeper after a lapsed lease).",
    ["by"])
QUOTA_REFUSALS = Counter(
    "chatforge_quota_refusals_total",
    "Tool calls refused because the user's daily quota of the tool was used up, by tool.", ["tool"])
TOKEN_BUDGET_REFUSALS = Counter(
    "chatforge_token_budget_refusals_total",
    "Messages (where=post) and runs before a model turn (where=turn) refused for a used-up token budget.",
    ["where"])
APPROVALS = Counter(
    "chatforge_tool_approvals_total", "Decisions on tool calls that asked for approval (approved, denied, expired).",
    ["outcome"])

# --- tools -----------------------------------------------------------------
TOOL_CALLS = Counter(
    "chatforge_tool_calls_total", "Tool calls recorded, by tool and status (success, error, timeout).",
    ["tool", "status"])
TOOL_ERRORS = Counter(
    "chatforge_tool_errors_total",
    "Failed tool calls by tool and kind (unknown_tool, bad_arguments, validation, execution, timeout, declined).",
    ["tool", "kind"])
TOOL_RETRIES = Counter("chatforge_tool_retries_total", "Tool attempts that failed and were tried again, by tool.",
                       ["tool"])
TOOL_CACHE_LOOKUPS = Counter(
    "chatforge_tool_cache_lookups_total",
    "Calls of tools with a cache TTL looked up in the tool result cache, by tool and outcome "
    "(hit, miss, unavailable).", ["tool", "outcome"])
TOOL_DURATION = Histogram(
    "chatforge_tool_duration_seconds", "A tool call's execution, retries and backoff included, by tool.", ["tool"],
    buckets=_FAST + (5.0, 10.0, 30.0, 60.0))

# --- providers -------------------------------------------------------------
PROVIDER_REQUESTS = Counter(
    "chatforge_provider_requests_total", "Model calls made (each attempt), by provider kind and model.",
    ["provider", "model"])
PROVIDER_ERRORS = Counter(
    "chatforge_provider_errors_total", "Model calls that failed, by provider kind, model and error kind.",
    ["provider", "model", "kind"])
PROVIDER_RETRIES = Counter(
    "chatforge_provider_retries_total", "Model calls tried again after a transient failure.", ["provider", "model"])
TIME_TO_FIRST_TOKEN = Histogram(
    "chatforge_provider_time_to_first_token_seconds",
    "From sending a model call to its first streamed text or reasoning.", ["provider", "model"], buckets=_SLOW)
TOKENS = Counter(
    "chatforge_provider_tokens_total", "Tokens the providers reported, by model and direction (input, output).",
    ["model", "direction"])


# --- processes -------------------------------------------------------------
GC_PAUSE = Histogram(
    "chatforge_gc_pause_seconds",
    "Full garbage-collection passes (generation 2): how long each stopped the process.",
    buckets=_FAST)

# --- read at each scrape -----------------------------------------------------
QUEUE_DEPTH_NAME = "chatforge_queue_depth"


class QueueDepthCollector(Collector):
    """``chatforge_queue_depth{queue}``: messages waiting in each queue of the
    broker (one pipelined LLEN per scrape), the signal to scale workers on.
    Nothing is reported when the broker is not Redis (embedded mode) or
    cannot be reached (the scrape still answers)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(QUEUE_DEPTH_NAME, "Messages waiting in each broker queue.", labels=["queue"])
        client = broker_client()
        queues = settings.CHATFORGE_QUEUES
        if client is not None:
            try:
                with client.pipeline(transaction=False) as pipe:
                    for queue in queues:
                        pipe.llen(queue)
                    depths = pipe.execute()
            except RedisError:
                depths = []
            for queue, depth in zip(queues, depths, strict=False):
                family.add_metric([queue], depth)
        yield family


SCRAPE_TIME_METRICS = {QUEUE_DEPTH_NAME}
