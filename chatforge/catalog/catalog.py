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

import logging
import threading
import time
from functools import lru_cache

from django.conf import settings

from tools.base import Tool
from tools.registry import DuplicateToolError, ToolRegistry, build_registry

from . import versioning
from .sources import tool_sources

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_cached: tuple[float, int, ToolRegistry] | None = None  # (built at, catalog version seen then, catalog)


@lru_cache(maxsize=1)
def _code_registry() -> ToolRegistry:
    from .internal_tools import INTERNAL_TOOLS

    registry = build_registry(settings.CHATFORGE_TOOL_MODULES)
    for tool in INTERNAL_TOOLS:
        registry.register(tool)
    return registry


def code_tool_names() -> set[str]:
    return set(_code_registry().names())


def code_tools() -> list[Tool]:
    """Every code tool this process loaded, sorted by name, whether switched off or not
    (the admin lists them all and says which are off)."""
    return _code_registry().all()


def _build() -> ToolRegistry:
    from .definitions import tool_from_definition
    from .models import ToolDefinition

    registry = ToolRegistry()
    if not settings.CHATFORGE_TOOLS_ENABLED:
        return registry
    disabled = set(settings.CHATFORGE_DISABLED_TOOLS)
    for tool in _code_registry().all():
        if tool.name not in disabled:
            registry.register(tool)
    for defn in ToolDefinition.objects.filter(enabled=True):
        if defn.name in disabled:
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
    return registry


def get_catalog(*, fresh: bool = False) -> ToolRegistry:
    """The current catalog; ``fresh`` skips the cache (admin actions, the API)."""
    global _cached
    now, version = time.monotonic(), versioning.seen()
    with _lock:
        if (not fresh and _cached is not None and _cached[1] == version
                and now - _cached[0] < settings.CHATFORGE_TOOL_CATALOG_TTL_S):
            return _cached[2]
    registry = _build()
    with _lock:
        _cached = (now, version, registry)
    return registry


def forget_cached() -> None:
    """The next ``get_catalog`` rebuilds (this process changed the catalog)."""
    global _cached
    with _lock:
        _cached = None
