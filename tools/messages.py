"""The exact error texts the model receives as tool results.

They live together because they are a contract with the model: each says what
went wrong and, when the model can fix it, that it should try again. Keeping
them in one module keeps the wording consistent and easy to test.
"""

from __future__ import annotations

from collections.abc import Sequence

# Echoing a huge argument string or schema message back would waste the model's
# context without helping it; the start is enough to recognise the mistake.
MAX_ECHOED_CHARS = 500
MAX_PROBLEM_CHARS = 300

_RETRY_HINT = "Please check the arguments and try again."


def unknown_tool(name: str, available: Sequence[str]) -> str:
    listed = ", ".join(available) if available else "(none)"
    return (
        f"Error: Unknown tool '{name}'. Available tools: {listed}. "
        "Please check the tool name and try again."
    )


def invalid_json(raw: str) -> str:
    return (
        "Error: Invalid JSON in tool arguments. Please check the JSON syntax and try again. "
        f"Arguments received: {clip(raw, MAX_ECHOED_CHARS)}."
    )


def arguments_not_an_object(kind: str, raw: str) -> str:
    return (
        f"Error: Tool arguments must be a JSON object, got {kind}. {_RETRY_HINT} "
        f"Arguments received: {clip(raw, MAX_ECHOED_CHARS)}."
    )


def invalid_arguments(name: str, problems: Sequence[str]) -> str:
    return f"Error: Invalid arguments for tool '{name}': {'; '.join(problems)}. {_RETRY_HINT}"


def handler_argument_error(name: str, message: str) -> str:
    return f"Error executing tool '{name}': {_without_final_period(message)}. {_RETRY_HINT}"


def handler_error(name: str, message: str) -> str:
    return f"Error executing tool '{name}': {message}"


def timed_out(name: str, timeout_s: float) -> str:
    return f"Error: Tool '{name}' timed out after {timeout_s:g} seconds."


def truncated_output(total_chars: int, shown_chars: int) -> str:
    """The marker ending a tool output cut to the output limit.

    It gives both numbers so the model knows it saw only the start and how
    much it missed (it may then ask the tool for a narrower result).
    """
    return f"\n…[output truncated: {total_chars} characters in total, showing the first {shown_chars}]"


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def _without_final_period(message: str) -> str:
    """Drop one trailing period so the template does not produce '..'."""
    message = message.rstrip()
    return message[:-1] if message.endswith(".") and not message.endswith("..") else message
