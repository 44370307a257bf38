"""Sampling and tool-choice options, provider-neutral, as a run stores them.

``/v1`` clients send OpenAI's parameters (``top_p``, ``stop``, ``seed``, the
penalties, ``response_format``, ``parallel_tool_calls``, ``tool_choice``);
the run keeps them under those names and each adapter maps what its API has
and ignores the rest (``SUPPORTED`` per kind below, which ``/v1`` also uses
to tell the client what was ignored). The helpers here read the OpenAI
shapes once, so the adapters only translate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SAMPLING_OPTIONS = (
    "top_p", "stop", "seed", "presence_penalty", "frequency_penalty", "response_format",
    "parallel_tool_calls", "tool_choice",
    "user",  # the client's end-user id, for the upstream's abuse monitoring
)

# What each provider kind honours of SAMPLING_OPTIONS (the rest is ignored).
SUPPORTED: dict[str, frozenset[str]] = {
    "openai": frozenset(SAMPLING_OPTIONS),
    "openai_responses": frozenset({"top_p", "response_format", "parallel_tool_calls", "tool_choice"}),
    # The pinned Anthropic API has no sampling parameters (it refuses them).
    "anthropic": frozenset({"stop", "parallel_tool_calls", "tool_choice"}),
    "gemini": frozenset({"top_p", "stop", "seed", "presence_penalty", "frequency_penalty", "response_format",
                         "tool_choice"}),
    "ollama": frozenset({"top_p", "stop", "seed", "presence_penalty", "frequency_penalty", "response_format"}),
    "demo": frozenset(),
}


def stop_sequences(value: Any) -> list[str]:
    """``stop`` (a string or a list of strings) as a list."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


def forced_tool(choice: Any) -> str | None:
    """The tool a ``tool_choice`` of ``{"type": "function", "function": {"name"}}`` names."""
    if isinstance(choice, Mapping):
        function = choice.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            return function["name"]
    return None


def json_output(response_format: Any) -> tuple[bool, dict[str, Any] | None, str]:
    """``(json wanted, its JSON schema or None, the schema's name)`` of a
    ``response_format``; ``(False, None, "")`` for text."""
    if not isinstance(response_format, Mapping) or response_format.get("type") in (None, "text"):
        return False, None, ""
    if response_format.get("type") == "json_schema":
        spec = response_format.get("json_schema") or {}
        return True, spec.get("schema"), str(spec.get("name") or "response")
    return True, None, ""
