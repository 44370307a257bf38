"""Server-side tools the model can call: definitions, registry and executor.

Plain Python on purpose - no Django at import time - so the run engine, Celery
tasks and benchmarks can all use it.
"""

from __future__ import annotations

from tools.base import Tool, ToolContext, ToolPolicy
from tools.decorators import tool
from tools.errors import ToolArgumentError, ToolError, TransientToolError
from tools.executor import ToolResult, configure_output_limit, execute_tool
from tools.registry import DuplicateToolError, ToolConfigurationError, ToolRegistry, build_registry

__all__ = [
    "DuplicateToolError",
    "Tool",
    "ToolArgumentError",
    "ToolConfigurationError",
    "ToolContext",
    "ToolError",
    "ToolPolicy",
    "ToolRegistry",
    "ToolResult",
    "TransientToolError",
    "build_registry",
    "configure_output_limit",
    "execute_tool",
    "tool",
]
