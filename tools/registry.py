"""The set of tools a deployment offers, keyed by name.

Built once at start-up (``build_registry``) so that configuration mistakes -
two tools with one name, a module without tools - stop the process instead of
surfacing in a conversation.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

from tools.base import Tool

# Loaded like any extra module (by path), so the framework does not import
# the tools built on it.
BUILTIN_MODULE = "tools.builtin"


class ToolConfigurationError(Exception):
    """The operator's tool set-up is wrong (duplicate names, a bad plug-in module)."""


class DuplicateToolError(ToolConfigurationError):
    """Two tools were registered under one name; the model could not tell them apart."""


class ToolRegistry:
    """Tools by name. Refuses duplicates instead of silently replacing one tool with another."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def register(self, tool: Tool) -> Tool:
        """Add ``tool`` and return it; raise ``DuplicateToolError`` if its name is taken."""
        if not isinstance(tool, Tool):
            raise TypeError(f"Only Tool instances can be registered, got {type(tool).__name__}")
        existing = self._tools.get(tool.name)
        if existing is not None:
            raise DuplicateToolError(
                f"A tool named {tool.name!r} is already registered "
                f"(handler {_describe_handler(existing)}); cannot also register "
                f"handler {_describe_handler(tool)} under that name"
            )
        self._tools[tool.name] = tool
        return tool

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or ``None`` if there is none."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """All tool names, sorted so that messages and specs are stable."""
        return sorted(self._tools)

    def all(self) -> list[Tool]:
        """All tools, sorted by name."""
        return [self._tools[name] for name in self.names()]

    def specs(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Provider specs of the named tools (in the order given), or of all tools.

        An unknown name raises ``KeyError``: asking for a tool that does not
        exist is a configuration error, and silently dropping it would leave
        the model without a tool the user expects it to have.
        """
        if names is None:
            return [tool.spec() for tool in self.all()]
        specs: list[dict[str, Any]] = []
        seen: set[str] = set()
        for name in names:
            if name in seen:
                continue  # Providers reject a request that lists one tool twice.
            seen.add(name)
            tool = self._tools.get(name)
            if tool is None:
                raise KeyError(
                    f"Unknown tool {name!r}; available tools: {', '.join(self.names()) or '(none)'}"
                )
            specs.append(tool.spec())
        return specs

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)


def build_registry(extra_modules: Iterable[str] = ()) -> ToolRegistry:
    """The built-in tools plus every ``Tool`` in each extra module's ``TOOLS`` list.

    Extra modules let deployments, tests and benchmarks plug in tools without
    editing ChatForge: each is a dotted import path whose module defines
    ``TOOLS: list[Tool]``.
    """
    if isinstance(extra_modules, str):
        # A lone string would be iterated character by character.
        raise TypeError("extra_modules must be a list of dotted module paths, not a string")

    registry = ToolRegistry()
    for module_path in (BUILTIN_MODULE, *extra_modules):
        for tool in _tools_from_module(module_path):
            registry.register(tool)
    return registry


def _tools_from_module(module_path: str) -> list[Tool]:
    """The ``TOOLS`` list of the module at ``module_path``, checked to hold only tools."""
    module = importlib.import_module(module_path)
    tools = getattr(module, "TOOLS", None)
    if not isinstance(tools, (list, tuple)):
        raise ToolConfigurationError(
            f"Tool module {module_path!r} must define TOOLS as a list of Tool objects"
        )
    for index, tool in enumerate(tools):
        if not isinstance(tool, Tool):
            raise ToolConfigurationError(
                f"Tool module {module_path!r}: TOOLS[{index}] is a "
                f"{type(tool).__name__}, not a Tool"
            )
    return list(tools)


def _describe_handler(tool: Tool) -> str:
    """``module.qualname`` of a tool's handler, to help find the two clashing definitions."""
    handler = tool.handler
    module = getattr(handler, "__module__", None) or "?"
    qualname = getattr(handler, "__qualname__", None) or type(handler).__qualname__
    return f"{module}.{qualname}"
