"""A module that forgot to define TOOLS."""

TOOL_LIST: list[object] = []
