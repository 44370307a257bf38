"""Tool sources beyond code tools and data tool rows, plugged into the
catalog by the apps that own them (MCP servers: ``chatforge/mcp/apps.py``).

The catalog is the one list of tools a run may use; where some of them come
from (an MCP server's stored tool list) is another domain's business. That
domain sits above the catalog — it builds on the catalog's rows, policies
and version — so the catalog cannot import it; it asks the sources its
apps registered at start-up instead (docs/architecture.md, "Layers").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tools.base import Tool
from tools.registry import ToolRegistry


@dataclass(frozen=True)
class FoundTool:
    """A tool found for a manual run, whether or not runs are offered it."""

    tool: Tool
    # Why runs would not offer it now ("" when they would).
    unavailable_reason: str


@dataclass(frozen=True)
class ToolSource:
    kind: str  # what the tools API calls its tools ("mcp")
    # Add the source's tools that runs may use to a catalog being built
    # (after code and data tools: a taken name stays with its owner).
    register: Callable[[ToolRegistry, set[str]], None]
    owns: Callable[[Tool], bool]  # whether a catalog tool is one of the source's
    find: Callable[[str], FoundTool | None]  # any of its tools by name, for a manual run


_sources: dict[str, ToolSource] = {}


def add_source(source: ToolSource) -> None:
    """Register ``source`` (an app's ``ready()``; again replaces it)."""
    _sources[source.kind] = source


def tool_sources() -> list[ToolSource]:
    return list(_sources.values())
