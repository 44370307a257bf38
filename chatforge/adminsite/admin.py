"""Registers every domain's admin pages (Django's admin autodiscovery
imports this module)."""

from . import accounts, catalog, conversations, files, llm, mcp, scheduling  # noqa: F401
