"""The run engine: models, tools and limits."""

from __future__ import annotations

from chatforge.env import env

from .mode import EMBEDDED

# The model used when a request names none. "demo" is the built-in scripted
# model; any other name is sent to the OpenAI-compatible provider below.
CHATFORGE_DEFAULT_MODEL: str = env.str("CHATFORGE_DEFAULT_MODEL", default="demo")
CHATFORGE_DEMO_TOKEN_DELAY_S: float = env.float("CHATFORGE_DEMO_TOKEN_DELAY_S", default=0.03)
OPENAI_BASE_URL: str = env.str("OPENAI_BASE_URL", default="https://api.openai.com/v1")
OPENAI_API_KEY: str = env.str("OPENAI_API_KEY", default="")
CHATFORGE_LLM_TIMEOUT_S: float = env.float("CHATFORGE_LLM_TIMEOUT_S", default=600.0)
CHATFORGE_LLM_MAX_RETRIES: int = env.int("CHATFORGE_LLM_MAX_RETRIES", default=2)
CHATFORGE_SYSTEM_PROMPT: str = env.str("CHATFORGE_SYSTEM_PROMPT", default="")

# Extra tool modules (dotted paths, each with a TOOLS list) loaded beside the
# built-ins: how deployments, tests and benchmarks plug in their own tools.
CHATFORGE_TOOL_MODULES: list[str] = env.list("CHATFORGE_TOOL_MODULES", default=[])

# Model turns with tools per run before one last turn without tools is forced.
CHATFORGE_MAX_ITERATIONS: int = env.int("CHATFORGE_MAX_ITERATIONS", default=10)
CHATFORGE_MAX_ITERATIONS_LIMIT: int = env.int("CHATFORGE_MAX_ITERATIONS_LIMIT", default=50)
# A step delivered more often than this (its workers keep dying) fails the run.
CHATFORGE_MAX_STEP_DELIVERIES: int = env.int("CHATFORGE_MAX_STEP_DELIVERIES", default=3)
# A run whose heartbeat is older than this is considered stalled and its next
# step is re-enqueued by the sweeper. Must exceed the longest step.
CHATFORGE_RUN_STALL_S: int = env.int("CHATFORGE_RUN_STALL_S", default=1200 if not EMBEDDED else 300)
CHATFORGE_MAX_MESSAGE_CHARS: int = env.int("CHATFORGE_MAX_MESSAGE_CHARS", default=100_000)
