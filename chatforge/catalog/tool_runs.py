"""Finding a tool to try by hand (the admin's "Run with arguments" page),
and what the page shows of it; running it is the engine's
(``orchestration/services/tools_by_hand.py``).

A person testing a tool wants the tool as it is configured, whether or not
runs may use it right now: a data tool being prepared is still disabled, a
code tool may be switched off by ``CHATFORGE_DISABLED_TOOLS``. So the tool
is looked up among all code tools and all data tool rows, not in the
catalog.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Literal

from django.conf import settings

from chatforge.workers.sandbox_reports import Offer, offer as sandbox_offer
from tools.base import Tool

from .code_tools import code_tools
from .definitions import tool_from_definition
from .models import ToolDefinition
from .sources import tool_sources

ToolKind = Literal["code", "data", "mcp"]

# A placeholder per JSON type for required properties the schema gives no
# example for: the person sees the shape of the arguments and fills it in.
_TYPE_PLACEHOLDERS: dict[str, Any] = {
    "string": "",
    "integer": 0,
    "number": 0,
    "boolean": False,
    "array": [],
    "object": {},
    "null": None,
}


@dataclass(frozen=True)
class RunnableTool:
    """A tool found for a manual run, and what the page says about it."""

    tool: Tool
    kind: ToolKind
    # Why runs would not offer it now ("" when they would).
    unavailable_reason: str
    definition: ToolDefinition | None = None


def find_runnable_tool(name: str) -> RunnableTool | None:
    """The code tool, data tool row or MCP server tool called ``name``, or None.

    A stored row that no longer builds (e.g. edited in the database by hand)
    raises ``ValueError`` with the reason, so the page can say so.
    """
    for tool in code_tools():
        if tool.name == name:
            return RunnableTool(tool=tool, kind="code", unavailable_reason=offered_reason(tool))
    definition = ToolDefinition.objects.filter(name=name).first()
    if definition is None:
        return _find_in_sources(name)
    reason = "" if definition.enabled else "This data tool is disabled: runs do not offer it."
    if not settings.CHATFORGE_TOOLS_ENABLED:
        reason = "Tools are turned off (CHATFORGE_TOOLS_ENABLED=false): runs get no tools."
    tool = tool_from_definition(definition)
    return RunnableTool(tool=tool, kind="data", unavailable_reason=offered_reason(tool, reason=reason),
                        definition=definition)


def _find_in_sources(name: str) -> RunnableTool | None:
    """A tool of another source (an MCP server's ``<server>__<tool>``),
    whether or not runs are offered it (an operator tries a server before
    switching it on)."""
    for source in tool_sources():
        found = source.find(name)
        if found is not None:
            reason = found.unavailable_reason
            if not settings.CHATFORGE_TOOLS_ENABLED:
                reason = "Tools are turned off (CHATFORGE_TOOLS_ENABLED=false): runs get no tools."
            return RunnableTool(tool=found.tool, kind=source.kind, unavailable_reason=reason)
    return None


def code_tool_unavailable_reason(name: str) -> str:
    """Why runs would not offer code tool ``name`` ("" when they would)."""
    if not settings.CHATFORGE_TOOLS_ENABLED:
        return "Tools are turned off (CHATFORGE_TOOLS_ENABLED=false): runs get no tools."
    if name in settings.CHATFORGE_DISABLED_TOOLS:
        return "Left out by CHATFORGE_DISABLED_TOOLS: runs do not offer it."
    return ""


def offered_reason(tool: Tool, offer: Offer | None = None, reason: str | None = None) -> str:
    """Why runs would not offer ``tool`` now ("" when they would): the
    switches' reason first (``reason``, else a code tool's), then for a
    sandboxed tool the sandbox's (no sandbox worker reporting that it can:
    docs/sandbox.md, "Where it runs")."""
    if reason is None:
        reason = code_tool_unavailable_reason(tool.name)
    if not reason and tool.policy.sandboxed:
        offer = offer if offer is not None else sandbox_offer(fresh=True)
        if not offer.ok:
            reason = offer.reason[:1].upper() + offer.reason[1:]
    return reason


def sample_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments to start from: each property's first example, its default,
    const or first enum value; required properties without any of these get
    an empty value of their type."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return {}
    required = set(schema.get("required") or [])
    sample: dict[str, Any] = {}
    for name, prop in properties.items():
        if not isinstance(prop, dict):
            continue
        found, value = _hinted_value(prop)
        if found:
            sample[name] = value
        elif name in required:
            sample[name] = _TYPE_PLACEHOLDERS.get(_first_type(prop), "")
    return sample


def _hinted_value(prop: dict[str, Any]) -> tuple[bool, Any]:
    examples = prop.get("examples")
    if isinstance(examples, list) and examples:
        return True, examples[0]
    for key in ("default", "const"):
        if key in prop:
            return True, prop[key]
    enum = prop.get("enum")
    if isinstance(enum, list) and enum:
        return True, enum[0]
    return False, None


def _first_type(prop: dict[str, Any]) -> str:
    declared = prop.get("type")
    if isinstance(declared, list):
        return next((t for t in declared if t != "null"), "null")
    return declared if isinstance(declared, str) else "string"


def policy_rows(tool: Tool) -> list[tuple[str, Any]]:
    """The tool's policy as (field, value) pairs, in the policy's own order."""
    return list(dataclasses.asdict(tool.policy).items())


def pretty_json(value: Any) -> str:
    """Indented JSON for reading (non-ASCII kept; anything unusual as its text)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)
