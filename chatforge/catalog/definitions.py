"""Turning catalog rows into tools.

The row models' checks (``checks.py``) build the real ``Tool`` with this, so
a row that saves is a row that works. Nothing here imports the models at run
time: the models run those checks (docs/architecture.md, "Layers").
"""

from __future__ import annotations

import copy
import dataclasses
from typing import TYPE_CHECKING, Any

from chatforge.settings.env import env
from tools.base import Tool, ToolContext, ToolPolicy
from tools.net.http_tools import ENV_PREFIX, HttpToolConfig, make_http_tool
from tools.sandbox.calls import script_handler

if TYPE_CHECKING:
    from .models import ToolDefinition


def env_lookup(name: str) -> str | None:
    """The environment variable ``name`` for a ``${NAME}`` placeholder, only if it
    starts with ``ENV_PREFIX`` (``TOOL_``), so an admin-defined URL can never leak
    DATABASE_URL or the secret key: the rule the missing-value advice
    (``tools.net.http_tools.missing_value_message``) describes."""
    if not name.startswith(ENV_PREFIX):
        return None
    value = env.str(name, default="")
    return value or None


def policy_of_row(row: Any, *, sandboxed: bool = False) -> ToolPolicy:
    """The ``ToolPolicy`` an admin row spells out field by field (a data
    tool definition, an MCP server): one reading for every kind of row.
    Rows without caching fields (MCP servers) are not cached; ``sandboxed``
    rows run under the limits they spell out."""
    return ToolPolicy(
        timeout_s=row.timeout_s,
        max_attempts=row.max_attempts,
        backoff_initial_s=row.backoff_initial_s,
        backoff_max_s=row.backoff_max_s,
        side_effects=row.side_effects,
        requires_approval=row.requires_approval,
        pool=row.pool,
        cache_ttl_s=getattr(row, "cache_ttl_s", 0.0) or 0.0,
        cache_scope=getattr(row, "cache_scope", "user") or "user",
        sandbox=row.sandbox_limits() if sandboxed else None,
    )


def _version_of(defn: ToolDefinition) -> str:
    """A data tool's version for cached results: it changes with every save."""
    return defn.updated_at.isoformat() if defn.updated_at else ""


def tool_from_definition(defn: ToolDefinition) -> Tool:
    if defn.kind == defn.Kind.SCRIPT:
        return Tool(
            name=defn.name,
            description=defn.description,
            parameters=defn.parameters,
            handler=script_handler(defn.name, defn.script),
            policy=policy_of_row(defn, sandboxed=True),
            version=_version_of(defn),
        )
    if defn.kind == defn.Kind.MOCK:
        response = copy.deepcopy(defn.mock_response)

        def respond(args: dict[str, Any], ctx: ToolContext) -> Any:
            return copy.deepcopy(response)

        return Tool(
            name=defn.name,
            description=defn.description,
            parameters=defn.parameters,
            handler=respond,
            policy=policy_of_row(defn),
            version=_version_of(defn),
        )
    config = HttpToolConfig(
        url=defn.url,
        method=defn.method,
        headers=dict(defn.headers or {}),
        params_mapping=dict(defn.params_mapping or {}),
        response_path=defn.response_path or None,
        timeout_s=defn.timeout_s,
        max_attempts=defn.max_attempts,
        backoff_initial_s=defn.backoff_initial_s,
        backoff_max_s=defn.backoff_max_s,
        allowed_domains=list(defn.allowed_domains or []),
    )
    tool = make_http_tool(
        name=defn.name,
        description=defn.description,
        parameters=defn.parameters,
        config=config,
        side_effects=defn.side_effects,
        env_lookup=env_lookup,
    )
    # The definition's whole policy (the HTTP config knows only timeouts and
    # retries; requires_approval is the engine's).
    return dataclasses.replace(tool, policy=policy_of_row(defn), version=_version_of(defn))
