"""The tools every ChatForge deployment has."""

from __future__ import annotations

from tools.base import Tool
from tools.builtin.calculator import CALCULATOR
from tools.builtin.echo import ECHO
from tools.builtin.files import LIST_FILES, READ_FILE
from tools.builtin.get_time import GET_TIME
from tools.builtin.python import PYTHON
from tools.builtin.web_fetch import WEB_FETCH
from tools.builtin.web_search import WEB_SEARCH

BUILTIN_TOOLS: list[Tool] = [CALCULATOR, ECHO, GET_TIME, LIST_FILES, PYTHON, READ_FILE, WEB_FETCH, WEB_SEARCH]
TOOLS = BUILTIN_TOOLS  # what tools.registry.build_registry reads of a tool module

__all__ = ["BUILTIN_TOOLS", "TOOLS", "CALCULATOR", "ECHO", "GET_TIME", "LIST_FILES", "PYTHON", "READ_FILE", "WEB_FETCH",
           "WEB_SEARCH"]
