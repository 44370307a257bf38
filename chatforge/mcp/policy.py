"""The executor's policy for one MCP tool: the server's, changed by the tool's override.

One ``ToolPolicy`` per tool, built here, is the only answer to "how long,
how often, may it be retried, does it need approval?"; the approval engine
reads ``requires_approval`` from it like from any other tool.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from chatforge.catalog.definitions import policy_of_row
from tools.base import ToolPolicy

if TYPE_CHECKING:  # the model's clean() checks policies: no import at run time
    from .models import McpServer


# The policy fields an override may set, with the JSON types each accepts.
OVERRIDE_FIELDS: dict[str, tuple[type, ...]] = {
    "timeout_s": (int, float),
    "max_attempts": (int,),
    "backoff_initial_s": (int, float),
    "backoff_max_s": (int, float),
    "side_effects": (str,),
    "requires_approval": (bool,),
    "pool": (str,),
}


def server_policy(server: McpServer) -> ToolPolicy:
    """The policy every tool of ``server`` gets unless overridden."""
    return policy_of_row(server)


def tool_policy(server: McpServer, tool_name: str) -> ToolPolicy:
    """The policy of the server's tool ``tool_name`` (its own name, not namespaced).

    Raises ``ValueError`` for an override the policy refuses (e.g. a negative
    timeout); ``validation.check_server`` reports the same before a save.
    """
    override = (server.tool_overrides or {}).get(tool_name) or {}
    return apply_override(server_policy(server), override)


def apply_override(policy: ToolPolicy, override: Mapping[str, Any]) -> ToolPolicy:
    """``policy`` with the fields ``override`` names replaced, checked by ``ToolPolicy``."""
    problems = override_problems(override)
    if problems:
        raise ValueError("; ".join(problems))
    changes = {key: float(value) if key.endswith("_s") else value for key, value in override.items()}
    return dataclasses.replace(policy, **changes)


def override_problems(override: object) -> list[str]:
    """Why ``override`` is not a valid per-tool override (empty when it is)."""
    if not isinstance(override, dict):
        return ['must be a JSON object of policy fields, e.g. {"timeout_s": 60}']
    problems: list[str] = []
    for key, value in override.items():
        accepted = OVERRIDE_FIELDS.get(key)
        if accepted is None:
            problems.append(f"unknown field '{key}' (allowed: {', '.join(OVERRIDE_FIELDS)})")
        elif isinstance(value, bool) and bool not in accepted or not isinstance(value, accepted):
            problems.append(f"'{key}' has the wrong type ({type(value).__name__})")
    return problems
