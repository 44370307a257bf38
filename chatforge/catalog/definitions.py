"""Turning catalog rows into tools, and checking rows before they are saved.

The checks build the real ``Tool`` (name pattern, description, JSON Schema),
so a row that saves is a row that works; anything wrong is reported per
field, in words an admin can act on.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from typing import Any

from django.core.exceptions import ValidationError

from chatforge.env import env
from tools.base import Tool, ToolContext, ToolPolicy
from tools.http_tools import ENV_PREFIX, HttpToolConfig, make_http_tool

from .models import Assistant, ToolDefinition


def env_lookup(name: str) -> str | None:
    """The environment variable ``name`` for a ``${NAME}`` placeholder, only if it
    starts with ``ENV_PREFIX`` (``TOOL_``), so an admin-defined URL can never leak
    DATABASE_URL or the secret key: the rule the missing-value advice
    (``tools.http_tools.missing_value_message``) describes."""
    if not name.startswith(ENV_PREFIX):
        return None
    value = env.str(name, default="")
    return value or None


def policy_of_row(row: Any) -> ToolPolicy:
    """The ``ToolPolicy`` an admin row spells out field by field (a data
    tool definition, an MCP server): one reading for every kind of row."""
    return ToolPolicy(
        timeout_s=row.timeout_s,
        max_attempts=row.max_attempts,
        backoff_initial_s=row.backoff_initial_s,
        backoff_max_s=row.backoff_max_s,
        side_effects=row.side_effects,
        requires_approval=row.requires_approval,
        pool=row.pool,
    )


def tool_from_definition(defn: ToolDefinition) -> Tool:
    if defn.kind == ToolDefinition.Kind.MOCK:
        response = copy.deepcopy(defn.mock_response)

        def respond(args: dict[str, Any], ctx: ToolContext) -> Any:
            return copy.deepcopy(response)

        return Tool(
            name=defn.name,
            description=defn.description,
            parameters=defn.parameters,
            handler=respond,
            policy=policy_of_row(defn),
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
    return dataclasses.replace(tool, policy=policy_of_row(defn))


def _string_map(value: Any, field: str, errors: dict[str, list[str]]) -> None:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        errors.setdefault(field, []).append('Must be a JSON object of strings, e.g. {"name": "value"}.')


def check_definition(defn: ToolDefinition) -> None:
    """Raise ``ValidationError`` (per field) unless the row makes a working tool."""
    from .catalog import code_tool_names

    if defn.kind not in ToolDefinition.Kind.values:
        return  # the field's own validation reports it; nothing else can be judged without a kind
    errors: dict[str, list[str]] = {}
    if defn.name in code_tool_names():
        errors["name"] = [f"'{defn.name}' is already a built-in or code tool; choose another name."]
    if defn.timeout_s is not None and defn.timeout_s <= 0:
        errors["timeout_s"] = ["Must be more than 0 seconds."]
    if defn.max_attempts is not None and defn.max_attempts < 1:
        errors["max_attempts"] = ["At least 1."]
    if defn.kind == ToolDefinition.Kind.MOCK and defn.mock_response is None:
        errors["mock_response"] = ["A mock tool needs the response it returns."]
    if defn.kind == ToolDefinition.Kind.HTTP:
        if not re.match(r"^https?://", defn.url or ""):
            errors["url"] = ["An HTTP tool needs an http:// or https:// URL."]
        _string_map(defn.headers or {}, "headers", errors)
        _string_map(defn.params_mapping or {}, "params_mapping", errors)
        if not isinstance(defn.allowed_domains or [], list) or not all(
            isinstance(d, str) and d for d in defn.allowed_domains or []
        ):
            errors["allowed_domains"] = ['Must be a JSON list of domain names, e.g. ["api.example.com"].']
        if defn.response_path:
            try:
                from jsonpath_ng import parse

                parse(defn.response_path)
            except Exception as exc:  # the library raises several exception types
                errors["response_path"] = [f"Not a valid JSONPath: {exc}"]
    for backoff in ("backoff_initial_s", "backoff_max_s"):
        if getattr(defn, backoff) is not None and getattr(defn, backoff) < 0:
            errors[backoff] = ["Must not be negative."]
    if not errors:
        try:
            tool_from_definition(defn)
        except (ValueError, TypeError) as exc:
            errors[_field_of(str(exc))] = [str(exc)]
    if errors:
        raise ValidationError(errors)


# Which field a message from building the tool is about, so the admin shows
# it next to that field rather than at the top of the form.
_FIELD_HINTS = (("invalid tool name", "name"), ("description", "description"), ("schema", "parameters"))


def _field_of(message: str) -> str:
    lowered = message.lower()
    return next((field for hint, field in _FIELD_HINTS if hint in lowered), "__all__")


def check_assistant(assistant: Assistant) -> None:
    from .catalog import get_catalog

    errors: dict[str, list[str]] = {}
    if not isinstance(assistant.tools, list) or not all(isinstance(t, str) for t in assistant.tools):
        errors["tools"] = ['Must be a JSON list of tool names, e.g. ["get_time", "calculator"].']
    else:
        known = set(get_catalog(fresh=True).names())
        unknown = [t for t in assistant.tools if t not in known]
        if unknown:
            errors["tools"] = [f"Unknown tool(s): {', '.join(unknown)}. Available tools: {', '.join(sorted(known))}."]
    for field in ("approval_required_tools", "approval_waived_tools"):
        names = getattr(assistant, field)
        if not isinstance(names, list) or not all(isinstance(t, str) for t in names):
            errors[field] = ['Must be a JSON list of tool names, e.g. ["web_fetch"].']
    both = set(assistant.approval_required_tools or []) & set(assistant.approval_waived_tools or [])
    if both and "approval_waived_tools" not in errors:
        errors["approval_waived_tools"] = [
            f"{', '.join(sorted(both))}: a tool cannot both require approval and be exempt from it."
        ]
    if errors:
        raise ValidationError(errors)
