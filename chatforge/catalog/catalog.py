"""The tools a run may use: code tools plus enabled data tools.

Code tools (built-ins, CHATFORGE_TOOL_MODULES, internal tools) are fixed for
the life of a process. Data tools come from the database and may change at
any time. The combined catalog is cached and rebuilt when a step's claim or
a POST has read another catalog version than the one it was built at (every
change to its rows bumps it: versioning.py, decision 0024), or at the latest
every CHATFORGE_TOOL_CATALOG_TTL_S seconds; so an admin's edit holds for
every run posted and every step claimed after it commits, without a query
of its own on any step or POST.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time

from django.conf import settings

from chatforge.workers import sandbox_reports
from tools.base import Tool
from tools.registry import DuplicateToolError, ToolRegistry

from . import versioning
from .code_tools import code_registry
from .definitions import tool_from_definition
from .models import CodeToolLimits, ToolDefinition
from .sources import tool_sources

logger = logging.getLogger(__name__)

_lock = threading.Lock()
# (built at, (catalog version seen then, this process's own changes then,
# whether sandboxed tools were offered then), catalog)
_cached: tuple[float, tuple[int, int, bool], ToolRegistry] | None = None


_sandbox_refusal_logged = ""


def _build() -> ToolRegistry:
    registry = ToolRegistry()
    if not settings.CHATFORGE_TOOLS_ENABLED:
        return registry
    disabled = set(settings.CHATFORGE_DISABLED_TOOLS)
    offer = sandbox_reports.offer()
    left_out: list[str] = []
    limits = {row.tool_name: row.sandbox_limits() for row in CodeToolLimits.objects.all()}
    for tool in code_registry().all():
        if tool.name in disabled:
            continue
        if tool.policy.sandboxed:
            if not offer.ok:
                left_out.append(tool.name)
                continue
            tool = _with_limits(tool, limits.get(tool.name))
        registry.register(tool)
    for defn in ToolDefinition.objects.filter(enabled=True):
        if defn.name in disabled:
            continue
        if defn.kind == ToolDefinition.Kind.SCRIPT and not offer.ok:
            left_out.append(defn.name)
            continue
        try:
            registry.register(tool_from_definition(defn))
        except DuplicateToolError:
            logger.error("tool definition %r is shadowed by a code tool of the same name; rename it", defn.name)
        except (ValueError, TypeError) as exc:
            logger.error("tool definition %r is invalid and was left out: %s", defn.name, exc)
    # Other sources' tools (MCP servers), after the others: a taken name stays with its owner.
    for source in tool_sources():
        source.register(registry, disabled)
    _log_left_out(left_out, offer.reason)
    return registry


def _with_limits(tool: Tool, limits) -> Tool:
    """A sandboxed code tool under the admin's limits, when it set some."""
    if limits is None:
        return tool
    return dataclasses.replace(tool, policy=dataclasses.replace(tool.policy, sandbox=limits))


def _log_left_out(names: list[str], reason: str) -> None:
    """Say once (until the reason changes) which sandboxed tools are not offered, and why."""
    global _sandbox_refusal_logged
    said = f"{','.join(names)}|{reason}" if names else ""
    if said and said != _sandbox_refusal_logged:
        # A warning where a sandbox worker is expected; where none can be
        # (embedded mode, switched off) it is how things are meant to be.
        level = logging.WARNING if settings.CHATFORGE_SANDBOX_ENABLED else logging.INFO
        logger.log(level, "tools %s left out of the catalog: %s", ", ".join(names), reason)
    _sandbox_refusal_logged = said


def sandbox_offer() -> sandbox_reports.Offer:
    """Whether sandboxed tools are offered now, and why not (the admin shows it)."""
    return sandbox_reports.offer(fresh=True)


def get_catalog(*, fresh: bool = False) -> ToolRegistry:
    """The current catalog; ``fresh`` skips the cache (admin actions, the API)."""
    global _cached
    now = time.monotonic()
    # A sandbox worker coming or going changes what is offered without a
    # catalog change; its reports are read at most every few seconds.
    seen = (versioning.seen(), versioning.own_changes(), sandbox_reports.offer().ok)
    with _lock:
        if (not fresh and _cached is not None and _cached[1] == seen
                and now - _cached[0] < settings.CHATFORGE_TOOL_CATALOG_TTL_S):
            return _cached[2]
    registry = _build()
    with _lock:
        _cached = (now, seen, registry)
    return registry


def forget_cached() -> None:
    """The next ``get_catalog`` rebuilds (tests that change settings)."""
    global _cached
    with _lock:
        _cached = None



def unknown_tools_problem(names: list[str], known: set[str] | None = None) -> str | None:
    """What is wrong with an assistant's list of tools if the catalog lacks
    some of them; None when it has them all. The admin's form and
    ``load_tools`` ask this beside the row's own checks (``Assistant.clean``):
    the catalog is built from the rows, so the rows cannot ask it themselves.
    ``known``: the catalog's names, when the caller has them already."""
    if known is None:
        known = set(get_catalog(fresh=True).names())
    unknown = [name for name in names if name not in known]
    if not unknown:
        return None
    return f"Unknown tool(s): {', '.join(unknown)}. Available tools: {', '.join(sorted(known))}."
