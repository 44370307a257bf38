"""The run engine: models, tools and limits."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from chatforge.settings.env import env

# The model used when a request names none. "demo" is the built-in scripted
# model; any other name is sent to the OpenAI-compatible provider below.
CHATFORGE_DEFAULT_MODEL: str = env.str("CHATFORGE_DEFAULT_MODEL", default="demo")
CHATFORGE_DEMO_TOKEN_DELAY_S: float = env.float("CHATFORGE_DEMO_TOKEN_DELAY_S", default=0.03)
# Environment defaults for models without an admin row (see chatforge/llm/routing.py).
OPENAI_BASE_URL: str = env.str("OPENAI_BASE_URL", default="https://api.openai.com/v1")
OPENAI_API_KEY: str = env.str("OPENAI_API_KEY", default="")
ANTHROPIC_BASE_URL: str = env.str("ANTHROPIC_BASE_URL", default="https://api.anthropic.com")
ANTHROPIC_API_KEY: str = env.str("ANTHROPIC_API_KEY", default="")
GEMINI_BASE_URL: str = env.str("GEMINI_BASE_URL", default="https://generativelanguage.googleapis.com")
GEMINI_API_KEY: str = env.str("GEMINI_API_KEY", default="")
OLLAMA_BASE_URL: str = env.str("OLLAMA_BASE_URL", default="http://localhost:11434")
CHATFORGE_LLM_TIMEOUT_S: float = env.float("CHATFORGE_LLM_TIMEOUT_S", default=600.0)
# A stream that sends nothing for this long is stalled: the turn is retried.
CHATFORGE_LLM_IDLE_TIMEOUT_S: float = env.float("CHATFORGE_LLM_IDLE_TIMEOUT_S", default=60.0)
# A streaming turn publishes at most one delta event per window, merging the
# deltas that arrive meanwhile (orchestration/event_log/delta_coalescer.py).
# The window is the turns streaming in the process divided by
# CHATFORGE_DELTA_EVENTS_PER_S, between CHATFORGE_DELTA_COALESCE_MS (a turn
# alone) and CHATFORGE_DELTA_COALESCE_MAX_MS (the longest any delta waits,
# plus the flusher's lateness). Both 0: every delta is published at once.
CHATFORGE_DELTA_COALESCE_MS: float = env.float("CHATFORGE_DELTA_COALESCE_MS", default=10.0)
CHATFORGE_DELTA_COALESCE_MAX_MS: float = env.float("CHATFORGE_DELTA_COALESCE_MAX_MS", default=100.0)
CHATFORGE_DELTA_EVENTS_PER_S: float = env.float("CHATFORGE_DELTA_EVENTS_PER_S", default=1250.0)
# Attempts of one model turn for transient failures (rate limits, overload,
# 5xx, connection trouble, stalls), with exponential backoff between them;
# a provider's own Retry-After is honoured up to CHATFORGE_LLM_RETRY_MAX_WAIT_S.
CHATFORGE_LLM_MAX_ATTEMPTS: int = env.int("CHATFORGE_LLM_MAX_ATTEMPTS", default=3)
CHATFORGE_LLM_RETRY_INITIAL_S: float = env.float("CHATFORGE_LLM_RETRY_INITIAL_S", default=1.0)
CHATFORGE_LLM_RETRY_MAX_WAIT_S: float = env.float("CHATFORGE_LLM_RETRY_MAX_WAIT_S", default=60.0)
CHATFORGE_SYSTEM_PROMPT: str = env.str("CHATFORGE_SYSTEM_PROMPT", default="")

# Extra tool modules (dotted paths, each with a TOOLS list) loaded beside the
# built-ins: how deployments, tests and benchmarks plug in their own tools.
CHATFORGE_TOOL_MODULES: list[str] = env.list("CHATFORGE_TOOL_MODULES", default=[])

# Model turns with tools per run before one last turn without tools is forced.
CHATFORGE_MAX_ITERATIONS: int = env.int("CHATFORGE_MAX_ITERATIONS", default=10)
CHATFORGE_MAX_ITERATIONS_LIMIT: int = env.int("CHATFORGE_MAX_ITERATIONS_LIMIT", default=50)
# A step delivered more often than this (its workers keep dying) fails the run.
CHATFORGE_MAX_STEP_DELIVERIES: int = env.int("CHATFORGE_MAX_STEP_DELIVERIES", default=3)
# A running step renews its lease (and its run's heartbeat) this often. A
# step whose lease is older than CHATFORGE_RUN_STALL_S was lost (its worker
# died): another delivery may take it over, and the sweeper re-enqueues the
# next step of runs whose heartbeat is that old.
CHATFORGE_HEARTBEAT_S: float = env.float("CHATFORGE_HEARTBEAT_S", default=10.0)
CHATFORGE_RUN_STALL_S: float = env.float("CHATFORGE_RUN_STALL_S", default=60.0)
if CHATFORGE_RUN_STALL_S < 3 * CHATFORGE_HEARTBEAT_S:
    raise ImproperlyConfigured(
        "CHATFORGE_RUN_STALL_S must be at least three heartbeats (3 x CHATFORGE_HEARTBEAT_S), "
        "or live steps would be taken for lost ones."
    )
# Worker liveness (docs/outages.md, "A worker host is lost"): every worker
# process renews one entry in Redis every CHATFORGE_LIVENESS_S; a process
# whose entry is older than CHATFORGE_WORKER_LOST_S is lost, and the steps it
# held are sent to another worker at once, without waiting for their leases
# above (which stay the backstop where Redis cannot tell).
CHATFORGE_LIVENESS_S: float = env.float("CHATFORGE_LIVENESS_S", default=1.0)
CHATFORGE_WORKER_LOST_S: float = env.float("CHATFORGE_WORKER_LOST_S", default=3.0)
if CHATFORGE_WORKER_LOST_S < 2 * CHATFORGE_LIVENESS_S:
    raise ImproperlyConfigured(
        "CHATFORGE_WORKER_LOST_S must be at least two liveness renewals (2 x CHATFORGE_LIVENESS_S), "
        "or one late renewal would count a live worker as lost."
    )
CHATFORGE_MAX_MESSAGE_CHARS: int = env.int("CHATFORGE_MAX_MESSAGE_CHARS", default=100_000)
# Runs a user may have queued or running at once (429 beyond).
CHATFORGE_MAX_ACTIVE_RUNS_PER_USER: int = env.int("CHATFORGE_MAX_ACTIVE_RUNS_PER_USER", default=5)
# Fair scheduling (docs/scheduling.md): model turns and tool calls one user
# may have running at once across the fleet (0: no cap); the admin's user
# limits override it per user. Caps of assistants and tools are set in the
# admin. Admin edits of limits reach every process within
# CHATFORGE_LIMITS_TTL_S seconds.
CHATFORGE_USER_MAX_RUNNING_STEPS: int = env.int("CHATFORGE_USER_MAX_RUNNING_STEPS", default=0)
CHATFORGE_LIMITS_TTL_S: float = env.float("CHATFORGE_LIMITS_TTL_S", default=5.0)
# Tools one request may name.
CHATFORGE_MAX_TOOLS_PER_REQUEST: int = env.int("CHATFORGE_MAX_TOOLS_PER_REQUEST", default=64)
# A tool call that needs approval and gets no decision within this many
# seconds is denied (the sweeper's pass notices; docs/tools.md, "Approval").
CHATFORGE_APPROVAL_TIMEOUT_S: float = env.float("CHATFORGE_APPROVAL_TIMEOUT_S", default=600.0)
# /v1/chat/completions cannot ask a person: "deny" runs such calls as a clear
# error result for the model; "reject" refuses a request that names such a
# tool with a 400 (and leaves them out of a request that names no tools).
CHATFORGE_V1_APPROVAL: str = env.str("CHATFORGE_V1_APPROVAL", default="deny")
if CHATFORGE_V1_APPROVAL not in ("deny", "reject"):
    raise ImproperlyConfigured(f"CHATFORGE_V1_APPROVAL must be 'deny' or 'reject', not {CHATFORGE_V1_APPROVAL!r}")
