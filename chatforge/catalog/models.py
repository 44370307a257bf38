"""Tools defined as data, and assistant profiles, editable in the admin.

Code tools live in the ``tools`` package; these rows add ``mock`` tools
(fixed response) and ``http`` tools (an outside API described as data) and
named assistants (system prompt, model, allowed tools, iteration cap).
Validation happens in ``clean()`` (``checks.py``) so the admin, the file
loader and the API refuse the same mistakes with the same messages; whether
an assistant's tools are in the catalog, which is built from these rows, the
forms that save assistants ask the catalog (``catalog.check_assistant_tools``).
"""

from __future__ import annotations

from django.db import models

from tools.sandbox_limits import LIMIT_HELP, LIMIT_LABEL, SandboxLimits

from .checks import check_assistant, check_definition, check_limits


class ToolPool(models.TextChoices):
    """Which worker runs a tool's calls (``tools.base.ToolPolicy.pool``)."""

    PROCESS = "process", "Process (tools worker: one call per process, hard time limit)"
    IO = "io", "I/O (tools_io worker: many calls at once on threads, for tools that wait on the network)"


POOL_HELP = ("Which worker runs its calls. “I/O” suits tools that wait on the network (HTTP and MCP tools "
             "stop at their timeout there too) and needs a worker on the tools_io queue.")


_LIMIT_DEFAULTS = SandboxLimits()


def _limit_field(name: str) -> models.PositiveIntegerField:
    """One limit of ``SandboxLimits``, with its name, default and help for people."""
    return models.PositiveIntegerField(LIMIT_LABEL[name], default=getattr(_LIMIT_DEFAULTS, name),
                                       help_text=LIMIT_HELP[name])


class SandboxLimitFields(models.Model):
    """The hard limits of a sandboxed tool's calls (``tools.sandbox_limits``),
    field by field, for the admin to edit. The wall time is the tool's
    timeout."""

    sandbox_cpu_s = _limit_field("cpu_s")
    sandbox_memory_mb = _limit_field("memory_mb")
    sandbox_max_processes = _limit_field("max_processes")
    sandbox_max_open_files = _limit_field("max_open_files")
    sandbox_max_file_mb = _limit_field("max_file_mb")
    sandbox_work_mb = _limit_field("work_mb")
    sandbox_max_output_kb = _limit_field("max_output_kb")

    class Meta:
        abstract = True

    def sandbox_limits(self) -> SandboxLimits:
        return SandboxLimits(**{name: getattr(self, f"sandbox_{name}") for name in LIMIT_HELP})


class CacheScope(models.TextChoices):
    USER = "user", "The same user's calls"
    GLOBAL = "global", "Anyone's calls (the same answer for everybody)"


CACHE_TTL_HELP = ("Seconds an identical call's successful result is served again without running the tool; "
                  "0 turns caching off. Only read-only and idempotent tools may be cached.")


class ToolDefinition(SandboxLimitFields):
    class Kind(models.TextChoices):
        MOCK = "mock", "Mock (fixed response)"
        HTTP = "http", "HTTP API"
        SCRIPT = "script", "Python script (runs in the sandbox)"

    class Method(models.TextChoices):
        GET = "GET"
        POST = "POST"
        PUT = "PUT"
        PATCH = "PATCH"
        DELETE = "DELETE"

    class SideEffects(models.TextChoices):
        READ_ONLY = "read_only", "Read-only"
        IDEMPOTENT = "idempotent", "Idempotent"
        NOT_IDEMPOTENT = "not_idempotent", "Not idempotent (never retried or repeated)"

    name = models.CharField(max_length=64, unique=True, help_text="Letters, digits, '_' and '-'; 64 at most.")
    description = models.TextField(help_text="What the tool does; the model reads this to decide when to call it.")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    parameters = models.JSONField(
        default=dict,
        help_text='JSON Schema of the arguments object, e.g. {"type": "object", "properties": {...}, "required": [...]}.',
    )
    enabled = models.BooleanField(default=True)
    # mock
    mock_response = models.JSONField(null=True, blank=True, help_text="Mock tools: what every call returns.")
    # http
    url = models.CharField(max_length=2000, blank=True, help_text="HTTP tools: may contain ${NAME} placeholders.")
    method = models.CharField(max_length=8, choices=Method.choices, default=Method.GET)
    headers = models.JSONField(default=dict, blank=True, help_text="Header values may contain ${NAME} placeholders.")
    params_mapping = models.JSONField(
        default=dict, blank=True, help_text="Tool argument → query (GET/DELETE) or JSON body field name."
    )
    response_path = models.CharField(max_length=500, blank=True, help_text="JSONPath into the response, e.g. $.data[0]")
    allowed_domains = models.JSONField(default=list, blank=True, help_text="If set, only these domains (and subdomains).")
    # script
    script = models.TextField(
        blank=True,
        help_text="Script tools: Python run in the sandbox for each call. The call's arguments are the dict "
                  "`args`; what it prints is the result (JSON if it prints JSON). No network; the "
                  "conversation's files are at /mnt/data (docs/sandbox.md).",
    )
    # policy
    timeout_s = models.FloatField(default=10.0)
    max_attempts = models.PositiveSmallIntegerField(default=3)
    backoff_initial_s = models.FloatField(default=0.5)
    backoff_max_s = models.FloatField(default=8.0)
    side_effects = models.CharField(max_length=16, choices=SideEffects.choices, default=SideEffects.READ_ONLY)
    requires_approval = models.BooleanField(default=False, help_text="Each call waits for the user to approve it before it runs.")
    pool = models.CharField(max_length=8, choices=ToolPool.choices, default=ToolPool.PROCESS, help_text=POOL_HELP)
    cache_ttl_s = models.FloatField(default=0.0, help_text=CACHE_TTL_HELP)
    cache_scope = models.CharField(max_length=8, choices=CacheScope.choices, default=CacheScope.USER,
                                   help_text="Whose identical calls may share a cached result.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        check_definition(self)


class CodeToolLimits(SandboxLimitFields):
    """The admin's limits for a sandboxed code tool (``python``, an
    operator's module's tool): they replace the limits its code declares."""

    tool_name = models.CharField(max_length=64, unique=True, help_text="The sandboxed code tool these limits are for.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tool_name"]
        verbose_name = "sandbox limits of a code tool"
        verbose_name_plural = "sandbox limits of code tools"

    def __str__(self) -> str:
        return self.tool_name

    def clean(self) -> None:
        check_limits(self)


class Assistant(models.Model):
    """A profile: system prompt, model, the tools it may use, its iteration cap."""

    name = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    system_prompt = models.TextField(blank=True)
    model = models.CharField(max_length=200, blank=True, help_text="Blank: the server's default model.")
    tools = models.JSONField(default=list, blank=True, help_text="Names of the tools it may use (an allow-list).")
    max_iterations = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Blank: the server default.")
    # Fair scheduling (docs/scheduling.md): enforced across the fleet.
    max_running_steps = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="Model turns and tool calls of this assistant's runs (all users) running at once "
                  "across the fleet; further steps wait in line without holding a worker. Blank: no cap.",
    )
    # Overrides of the tools' own requires_approval policy for this
    # assistant's runs (docs/tools.md, "Approval"): ask before these...
    approval_required_tools = models.JSONField(
        default=list, blank=True, help_text="Tools its runs run only after the user approves each call."
    )
    # ...and never ask for these, whatever their policy says.
    approval_waived_tools = models.JSONField(
        default=list, blank=True, help_text="Tools its runs run without asking, even where the tool's policy asks."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        check_assistant(self)  # and the form that saves it: catalog.check_assistant_tools


class CatalogVersion(models.Model):
    """One row (id 1, made by the first change; none reads as 0): a number
    every change to the tool catalog's rows bumps in the change's own
    transaction (``chatforge/catalog/versioning.py``).
    A step's claim reads it in the same statement, so a worker whose cached
    catalog is older rebuilds it before the step uses it: an admin's edit
    holds for every step claimed after it commits (decision 0024)."""

    value = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = "tool catalog version"
