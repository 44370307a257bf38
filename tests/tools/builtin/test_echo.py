from __future__ import annotations

import pytest

from tools.builtin.echo import ECHO
from tools.executor import execute_tool
from tests.tools.factories import registry_of


@pytest.mark.parametrize("text", ["hello", "", "multi\nline ünïcode 🙂", '{"looks": "like json"}'])
def test_echo_returns_the_text_unchanged(text: str) -> None:
    result = execute_tool(registry_of(ECHO), "echo", {"text": text})

    assert result.success
    assert result.result == text
    assert result.output_text() == text


def test_echo_requires_text_and_nothing_else() -> None:
    registry = registry_of(ECHO)

    assert execute_tool(registry, "echo", {}).error == (
        "Error: Invalid arguments for tool 'echo': $: 'text' is a required property. "
        "Please check the arguments and try again."
    )
    assert execute_tool(registry, "echo", {"text": "a", "more": 1}).status == "error"
    assert ECHO.policy.side_effects == "read_only"
