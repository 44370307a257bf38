"""What a tool is: data (name, description, JSON schema, policy) plus a function.

Keeping tools as plain frozen dataclasses means the registry, the executor, the
run engine and tests can all build and inspect them without any framework.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from tools.arguments import strict_schema
from tools.redaction import SecretsSeen
from tools.sandbox_limits import SandboxLimits

if TYPE_CHECKING:
    from tools.files import FileAccess
    from tools.sandbox.runner import Sandbox

SideEffects = Literal["read_only", "idempotent", "not_idempotent"]
_SIDE_EFFECTS: frozenset[str] = frozenset({"read_only", "idempotent", "not_idempotent"})
# Where a call runs (docs/decisions/0025-tools-on-an-io-pool-by-policy.md):
# "process" on the tools worker's prefork pool, one call per process, under
# the hard time limit that recycles a process stuck in a handler; "io" on the
# tools_io worker's threads, many calls at once with no hop to a child
# process, for handlers that mostly wait on the network.
ToolPool = Literal["process", "io"]
_POOLS: frozenset[str] = frozenset({"process", "io"})
# Whose identical calls may share a cached result (docs/tools.md, "Caching"):
# "user", the same user's; "global", anyone's (for data that is the same for
# everybody, such as a public API's answer).
CacheScope = Literal["user", "global"]
_CACHE_SCOPES: frozenset[str] = frozenset({"user", "global"})

# Providers (OpenAI, Ollama, Gemini) all accept this alphabet; anything else is
# rejected by at least one of them when the spec is sent, which is too late.
_NAME_PATTERN = re.compile(r"[a-zA-Z0-9_-]{1,64}")


@dataclass(frozen=True)
class ToolPolicy:
    """How the executor runs one tool: its time budget and retry behaviour.

    One policy object per tool keeps the answer to "which retry budget applies?"
    in a single place.
    """

    timeout_s: float = 10.0
    # Total attempts for transient failures; 1 means no retry.
    max_attempts: int = 1
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 8.0
    # A failed or timed-out call may still have had its effect, so only
    # read-only and idempotent tools are ever retried.
    side_effects: SideEffects = "read_only"
    # Each call waits for a person to approve it before it is enqueued
    # (orchestration/services/approvals.py); an assistant may override it.
    requires_approval: bool = False
    # "io" only for handlers that wait rather than compute and that honour
    # their timeout: on the threads pool nothing can stop a sync handler that
    # hangs (its thread is abandoned at the timeout), and its CPU work holds
    # up every other call of that worker.
    pool: ToolPool = "process"
    # Seconds an identical call's successful result is served again without
    # running the tool (0: never). Only for read-only and idempotent tools:
    # a cached answer must be one a second run would have given.
    cache_ttl_s: float = 0.0
    cache_scope: CacheScope = "user"
    # Not None: every call runs on the sandbox worker, and the handler gets
    # ``context.sandbox`` to run code under these limits (docs/sandbox.md);
    # where no sandbox can run, the tool is not offered at all.
    sandbox: SandboxLimits | None = None

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {self.timeout_s!r}")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts!r}")
        if self.backoff_initial_s < 0 or self.backoff_max_s < 0:
            raise ValueError("backoff_initial_s and backoff_max_s must not be negative")
        if self.side_effects not in _SIDE_EFFECTS:
            raise ValueError(
                f"side_effects must be one of {sorted(_SIDE_EFFECTS)}, got {self.side_effects!r}"
            )
        if self.pool not in _POOLS:
            raise ValueError(f"pool must be one of {sorted(_POOLS)}, got {self.pool!r}")
        if isinstance(self.cache_ttl_s, bool) or not isinstance(self.cache_ttl_s, (int, float)) or self.cache_ttl_s < 0:
            raise ValueError(f"cache_ttl_s must be a number of seconds, 0 or more, got {self.cache_ttl_s!r}")
        if self.cache_scope not in _CACHE_SCOPES:
            raise ValueError(f"cache_scope must be one of {sorted(_CACHE_SCOPES)}, got {self.cache_scope!r}")
        if self.cache_ttl_s and self.side_effects == "not_idempotent":
            raise ValueError("cache_ttl_s is only for read-only and idempotent tools: a cached result "
                             "stands in for running the tool again")
        if self.sandbox is not None and not isinstance(self.sandbox, SandboxLimits):
            raise TypeError(f"sandbox must be a SandboxLimits or None, got {self.sandbox!r}")

    @property
    def cached(self) -> bool:
        """Whether identical calls' results are served from the cache."""
        return self.cache_ttl_s > 0

    @property
    def sandboxed(self) -> bool:
        return self.sandbox is not None


@dataclass(frozen=True)
class ToolContext:
    """Who and what a tool call belongs to, passed to every handler.

    Handlers with side effects use ``idempotency_key`` so that a Celery
    redelivery or a retry of the same tool call does not act twice.
    """

    run_id: str | None = None
    tool_call_id: str | None = None
    user_id: int | None = None
    # Looks up one of the calling user's stored secrets by name (e.g.
    # "tavily_api_key"); None when the user has none. Supplied by the engine,
    # so tools never touch storage or keys themselves.
    secret_lookup: Callable[[str], str | None] | None = field(default=None, compare=False, repr=False)

    # Whether the run this call belongs to was cancelled or has ended: long
    # handlers may poll it to stop early; the executor stops retrying.
    cancel_check: Callable[[], bool] | None = field(default=None, compare=False, repr=False)

    # Every secret value handed to this call; the executor scrubs them from
    # its result, error and logs (tools.redaction).
    secrets_seen: SecretsSeen = field(default_factory=SecretsSeen, compare=False, repr=False)

    # The files of the run's conversation (tools.files): to read the files
    # the model names and to save the files the tool returns. None outside a
    # conversation's run (a tool run by hand in the admin, say).
    files: FileAccess | None = field(default=None, compare=False, repr=False)

    # Runs code in a fresh sandbox under the tool's limits (tools.sandbox):
    # given only to calls of tools whose policy has ``sandbox`` set, on the
    # sandbox worker; None everywhere else.
    sandbox: Sandbox | None = field(default=None, compare=False, repr=False)

    def secret(self, name: str) -> str | None:
        """The calling user's secret ``name``, or None (recorded for scrubbing)."""
        value = self.secret_lookup(name) if self.secret_lookup is not None else None
        self.secrets_seen.add(value)
        return value

    def uses_secret(self, value: str) -> str:
        """Record a secret the tool got elsewhere (an operator's key, an
        environment value) so that it is scrubbed like the user's; returns it."""
        self.secrets_seen.add(value)
        return value

    def cancelled(self) -> bool:
        """True once the run no longer wants this call's result."""
        return bool(self.cancel_check and self.cancel_check())

    @property
    def idempotency_key(self) -> str | None:
        """A key stable across retries and redeliveries of one tool call, if known."""
        if self.run_id is None or self.tool_call_id is None:
            return None
        return f"{self.run_id}:{self.tool_call_id}"


Handler = Callable[[dict[str, Any], ToolContext], Any]


@dataclass(frozen=True)
class Tool:
    """A tool the model may call.

    Everything is checked at construction, so a bad name or schema fails at
    start-up rather than when a provider rejects the request mid-conversation.
    ``handler`` may be a plain function or a coroutine function; it receives
    arguments already validated against ``parameters``.
    """

    name: str
    description: str
    # JSON Schema (Draft 2020-12) of the arguments object. Excluded from the hash
    # because dicts are unhashable; the name identifies a tool anyway.
    parameters: dict[str, Any] = field(hash=False)
    handler: Handler
    policy: ToolPolicy = ToolPolicy()
    # The tool author's mark for "the same arguments now give another
    # result": with the name, description and schema it keys cached results
    # (docs/tools.md, "Caching"), so a new version never serves an old answer.
    version: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_PATTERN.fullmatch(self.name):
            raise ValueError(
                f"Invalid tool name {self.name!r}: use 1-64 characters from a-z, A-Z, 0-9, '_' and '-'"
            )
        if not isinstance(self.description, str) or not self.description.strip():
            raise ValueError(f"Tool {self.name!r} needs a non-empty description")
        if not callable(self.handler):
            raise TypeError(f"Tool {self.name!r}: handler must be callable")
        if not isinstance(self.policy, ToolPolicy):
            raise TypeError(f"Tool {self.name!r}: policy must be a ToolPolicy")
        _check_parameters_schema(self.name, self.parameters)
        # Own a copy so that later edits to the caller's dict cannot change a
        # registered tool behind the registry's back.
        object.__setattr__(self, "parameters", copy.deepcopy(self.parameters))

    @cached_property
    def validator(self) -> Draft202012Validator:
        """The validator of arguments, built once per tool rather than per call.

        It checks the strict view of ``parameters`` (undeclared properties are
        refused unless the schema allows them; see ``tools.arguments.strict_schema``),
        while providers are still sent ``parameters`` as written.
        """
        return Draft202012Validator(
            strict_schema(self.parameters), format_checker=Draft202012Validator.FORMAT_CHECKER
        )

    def spec(self) -> dict[str, Any]:
        """The tool in OpenAI function-tool format.

        The schema is a copy: provider adapters sometimes rewrite schemas (strict
        mode, Gemini's subset) and must not alter the registered tool.
        """
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": copy.deepcopy(self.parameters),
            },
        }


def _check_parameters_schema(name: str, parameters: object) -> None:
    """Refuse a parameters schema that is invalid or does not describe an object.

    Tool arguments are always a JSON object, so a schema of anything else can
    never validate a call.
    """
    if not isinstance(parameters, dict):
        raise TypeError(f"Tool {name!r}: parameters must be a dict (a JSON Schema)")
    try:
        Draft202012Validator.check_schema(parameters)
    except SchemaError as exc:
        raise ValueError(f"Tool {name!r}: invalid parameters schema: {exc.message}") from exc
    if parameters.get("type") != "object":
        raise ValueError(f"Tool {name!r}: parameters schema must have \"type\": \"object\"")
