"""A registered MCP server: where it is, how to call it, and what it offers.

The row also stores the server's tool list as last discovered (``tools/list``),
so every worker builds the same tools from the database without asking the
server on every step; ``discovery.py`` refreshes it after
CHATFORGE_MCP_DISCOVERY_TTL_S. Validation happens in ``clean()`` so the admin
and any other writer refuse the same mistakes with the same messages.
"""

from __future__ import annotations

from django.core.validators import RegexValidator
from django.db import models

from chatforge.catalog.models import POOL_HELP, ToolPool

from .validation import check_server

# Letters, digits and '-', in words joined by single '_': never "__", which
# separates the server's name from the tool's in "<server>__<tool>".
SERVER_NAME_PATTERN = r"^[a-zA-Z0-9-]+(?:_[a-zA-Z0-9-]+)*$"
SERVER_NAME_MAX = 32


class McpServer(models.Model):
    class Transport(models.TextChoices):
        STREAMABLE_HTTP = "streamable_http", "Streamable HTTP"
        SSE = "sse", "SSE (the older HTTP+SSE transport)"

    class SideEffects(models.TextChoices):
        READ_ONLY = "read_only", "Read-only"
        IDEMPOTENT = "idempotent", "Idempotent"
        NOT_IDEMPOTENT = "not_idempotent", "Not idempotent (never retried or repeated)"

    name = models.CharField(
        max_length=SERVER_NAME_MAX,
        unique=True,
        validators=[
            RegexValidator(SERVER_NAME_PATTERN, "Letters, digits and '-', with single '_' between words.")
        ],
        help_text="Its tools are offered as name__tool (e.g. docs__search). "
        "Letters, digits, '-' and single '_'.",
    )
    url = models.CharField(
        max_length=2000, help_text="The server's MCP endpoint, e.g. https://mcp.example.com/mcp."
    )
    transport = models.CharField(max_length=16, choices=Transport.choices, default=Transport.STREAMABLE_HTTP)
    headers = models.JSONField(
        default=dict,
        blank=True,
        help_text='Sent with every request, e.g. {"Authorization": "Bearer ${EXAMPLE_TOKEN}"}. ${NAME} is '
        "filled from the calling user's secret “name” (lower case), else from the environment variable "
        "NAME if it starts with TOOL_.",
    )
    enabled = models.BooleanField(default=True)
    allowed_tools = models.JSONField(
        default=list,
        blank=True,
        help_text='The server\'s own tool names to offer, e.g. ["search", "fetch"]; empty: all of them.',
    )
    # Policy of every tool of the server; ``tool_overrides`` changes it per tool.
    timeout_s = models.FloatField(default=30.0)
    max_attempts = models.PositiveSmallIntegerField(default=1)
    backoff_initial_s = models.FloatField(default=0.5)
    backoff_max_s = models.FloatField(default=8.0)
    side_effects = models.CharField(
        max_length=16,
        choices=SideEffects.choices,
        default=SideEffects.NOT_IDEMPOTENT,
        help_text="What the server's tools may do; only read-only and idempotent tools are retried.",
    )
    requires_approval = models.BooleanField(default=False)
    pool = models.CharField(max_length=8, choices=ToolPool.choices, default=ToolPool.PROCESS, help_text=POOL_HELP)
    tool_overrides = models.JSONField(
        default=dict,
        blank=True,
        help_text='Per tool (the server\'s own name), any of the policy fields, e.g. '
        '{"delete_page": {"side_effects": "not_idempotent", "requires_approval": true, "timeout_s": 60, '
        '"pool": "io"}}.',
    )
    # Discovery: written by ``discovery.py`` only.
    discovered_tools = models.JSONField(default=list, blank=True, editable=False)
    discovered_at = models.DateTimeField(null=True, blank=True, editable=False)
    discovery_attempted_at = models.DateTimeField(null=True, blank=True, editable=False)
    discovery_error = models.TextField(blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "MCP server"

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        check_server(self)
