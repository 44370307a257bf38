"""Checking catalog rows before they are saved (the models' ``clean()``).

A data tool's check builds the real ``Tool`` (name pattern, description,
JSON Schema), so a row that saves is a row that works; anything wrong is
reported per field, in words an admin can act on. The models import this
module, so nothing here imports them at run time, nor the catalog built
from them (docs/architecture.md, "Layers").
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError

from tools.sandbox_limits import LIMIT_HELP

from .code_tools import code_tool_names
from .definitions import tool_from_definition

if TYPE_CHECKING:
    from .models import Assistant, SandboxLimitFields, ToolDefinition


def _string_map(value: Any, field: str, errors: dict[str, list[str]]) -> None:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        errors.setdefault(field, []).append('Must be a JSON object of strings, e.g. {"name": "value"}.')


def check_definition(defn: ToolDefinition) -> None:
    """Raise ``ValidationError`` (per field) unless the row makes a working tool."""
    if defn.kind not in defn.Kind.values:
        return  # the field's own validation reports it; nothing else can be judged without a kind
    errors: dict[str, list[str]] = {}
    if defn.name in code_tool_names():
        errors["name"] = [f"'{defn.name}' is already a built-in or code tool; choose another name."]
    if defn.timeout_s is not None and defn.timeout_s <= 0:
        errors["timeout_s"] = ["Must be more than 0 seconds."]
    if defn.max_attempts is not None and defn.max_attempts < 1:
        errors["max_attempts"] = ["At least 1."]
    if defn.cache_ttl_s is not None and defn.cache_ttl_s < 0:
        errors["cache_ttl_s"] = ["Must be 0 (no caching) or more seconds."]
    elif defn.cache_ttl_s and defn.side_effects == defn.SideEffects.NOT_IDEMPOTENT:
        errors["cache_ttl_s"] = ["Only read-only and idempotent tools may be cached: a cached result stands in "
                                 "for running the tool again. Set 0, or change its side effects."]
    if defn.kind == defn.Kind.SCRIPT:
        if not (defn.script or "").strip():
            errors["script"] = ["A script tool needs the Python it runs."]
        else:
            try:
                compile(defn.script, f"<{defn.name or 'script'}>", "exec")
            except SyntaxError as exc:
                errors["script"] = [f"Not valid Python: {exc.msg} (line {exc.lineno})."]
        _limit_errors(defn, errors)
    if defn.kind == defn.Kind.MOCK and defn.mock_response is None:
        errors["mock_response"] = ["A mock tool needs the response it returns."]
    if defn.kind == defn.Kind.HTTP:
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


def _limit_errors(row: SandboxLimitFields, errors: dict[str, list[str]]) -> None:
    for name in LIMIT_HELP:
        value = getattr(row, f"sandbox_{name}")
        if value is not None and value < 1:
            errors[f"sandbox_{name}"] = ["At least 1."]


def check_limits(row: SandboxLimitFields) -> None:
    """Raise ``ValidationError`` (per field) unless every limit is a usable number."""
    errors: dict[str, list[str]] = {}
    _limit_errors(row, errors)
    if errors:
        raise ValidationError(errors)


# Which field a message from building the tool is about, so the admin shows
# it next to that field rather than at the top of the form.
_FIELD_HINTS = (("invalid tool name", "name"), ("description", "description"), ("schema", "parameters"))


def _field_of(message: str) -> str:
    lowered = message.lower()
    return next((field for hint, field in _FIELD_HINTS if hint in lowered), "__all__")


def check_assistant(assistant: Assistant) -> None:
    """Raise ``ValidationError`` (per field) unless the row's lists are lists
    of tool names that do not contradict each other. Whether the catalog has
    those tools is ``catalog.check_assistant_tools``, asked by the forms that
    save assistants."""
    errors: dict[str, list[str]] = {}
    if not isinstance(assistant.tools, list) or not all(isinstance(t, str) for t in assistant.tools):
        errors["tools"] = ['Must be a JSON list of tool names, e.g. ["get_time", "calculator"].']
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
