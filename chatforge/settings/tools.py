"""The tool system: which tools exist, limits, and outbound network rules."""

from __future__ import annotations

from chatforge.settings.env import env

# One switch turns every tool off (runs then get no tools at all).
CHATFORGE_TOOLS_ENABLED: bool = env.bool("CHATFORGE_TOOLS_ENABLED", default=True)
# Code tools to leave out by name (data tools have their own enabled flag).
CHATFORGE_DISABLED_TOOLS: list[str] = env.list("CHATFORGE_DISABLED_TOOLS", default=[])
# The longest a process keeps its tool catalog when nothing told it of a
# change (rows edited by hand in SQL). Every change made through Django
# bumps the catalog's version, which workers read with each step's claim and
# a web process with the statement that locks a POST's conversation (0024).
# Calls of tools whose policy says pool="io" go to the tools_io queue (a
# threads worker, decision 0025). False: every call goes to the prefork
# tools worker, for a deployment that runs no tools_io worker.
CHATFORGE_TOOLS_IO_POOL: bool = env.bool("CHATFORGE_TOOLS_IO_POOL", default=True)
CHATFORGE_TOOL_CATALOG_TTL_S: float = env.float("CHATFORGE_TOOL_CATALOG_TTL_S", default=60.0)
# Tool outputs longer than this are cut, with a marker saying so.
CHATFORGE_TOOL_OUTPUT_MAX_CHARS: int = env.int("CHATFORGE_TOOL_OUTPUT_MAX_CHARS", default=20_000)
# host:port pairs tools may reach although they are not public (tests only).
CHATFORGE_TOOLS_ALLOWED_PRIVATE_HOSTS: list[str] = env.list("CHATFORGE_TOOLS_ALLOWED_PRIVATE_HOSTS", default=[])
# Log each tool call's arguments and output (at DEBUG). Off: they can hold users' data.
CHATFORGE_LOG_TOOL_PAYLOADS: bool = env.bool("CHATFORGE_LOG_TOOL_PAYLOADS", default=False)
# The same tool with the same arguments more often than this in one run gets
# an error telling the model to stop repeating itself.
CHATFORGE_TOOL_REPEAT_LIMIT: int = env.int("CHATFORGE_TOOL_REPEAT_LIMIT", default=2)

# The tools a /v1 chat completion gets when it names none (and no assistant):
# unset, every enabled tool (as the REST API); "none", no tools; else a
# comma-separated list of tool names.
_openai_default_tools = env.str("CHATFORGE_OPENAI_DEFAULT_TOOLS", default=None)
CHATFORGE_OPENAI_DEFAULT_TOOLS: list[str] | None = (
    None if _openai_default_tools is None
    else [] if _openai_default_tools.strip().lower() in ("", "none")
    else [name.strip() for name in _openai_default_tools.split(",") if name.strip()]
)

# MCP servers (chatforge.mcp, docs/mcp.md): how long a server's discovered
# tool list is used before a tools worker asks the server again (tools/list),
# and the time one discovery may take.
CHATFORGE_MCP_DISCOVERY_TTL_S: float = env.float("CHATFORGE_MCP_DISCOVERY_TTL_S", default=300.0)
CHATFORGE_MCP_DISCOVERY_TIMEOUT_S: float = env.float("CHATFORGE_MCP_DISCOVERY_TIMEOUT_S", default=15.0)
