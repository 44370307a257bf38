"""The process-wide tool registry: built-ins plus CHATFORGE_TOOL_MODULES."""

from __future__ import annotations

from functools import lru_cache

from django.conf import settings

from tools.registry import ToolRegistry, build_registry


@lru_cache(maxsize=1)
def get_registry() -> ToolRegistry:
    return build_registry(settings.CHATFORGE_TOOL_MODULES)
