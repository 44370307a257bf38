"""The code tools: built-ins, CHATFORGE_TOOL_MODULES and the internal tools.

They are fixed for the life of a process, so they are loaded once. Kept
apart from the catalog (``catalog.py``), which also reads the data tool
rows: a row's check asks whether a code tool has its name, and the row
models run that check (``checks.py``), so what they reach must not reach
back to the rows (docs/architecture.md, "Layers").
"""

from __future__ import annotations

from functools import lru_cache

from django.conf import settings

from tools.base import Tool
from tools.registry import ToolRegistry, build_registry

from .internal_tools import INTERNAL_TOOLS


@lru_cache(maxsize=1)
def code_registry() -> ToolRegistry:
    """Every code tool this process loaded (switched off or not)."""
    registry = build_registry(settings.CHATFORGE_TOOL_MODULES)
    for tool in INTERNAL_TOOLS:
        registry.register(tool)
    return registry


def code_tool_names() -> set[str]:
    return set(code_registry().names())


def code_tools() -> list[Tool]:
    """Every code tool this process loaded, sorted by name, whether switched off or not
    (the admin lists them all and says which are off)."""
    return code_registry().all()
