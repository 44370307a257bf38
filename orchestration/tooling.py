"""The tools a run may use: the catalog of code and data tools."""

from __future__ import annotations

from chatforge.catalog.catalog import get_catalog
from tools.registry import ToolRegistry


def get_registry() -> ToolRegistry:
    return get_catalog()
