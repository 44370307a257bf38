"""${NAME} placeholders in a server's headers: the HTTP tools' one mechanism,
filled from the calling user's secrets or TOOL_ environment variables, every
value recorded for scrubbing; discovery sends only what needs no user."""

from __future__ import annotations

import re

import pytest

from chatforge.mcp.headers import call_headers, discovery_headers
from tools.base import ToolContext
from tools.errors import ToolError


def context(**secrets: str) -> ToolContext:
    return ToolContext(user_id=7, secret_lookup=secrets.get)


def test_a_users_secret_fills_the_placeholder_and_is_recorded_for_scrubbing():
    ctx = context(docs_token="user-token-123")
    headers = call_headers({"Authorization": "Bearer ${DOCS_TOKEN}", "X-Plain": "as is"}, ctx)
    assert headers == {"Authorization": "Bearer user-token-123", "X-Plain": "as is"}
    assert ctx.secrets_seen.values() == frozenset({"user-token-123"})


def test_a_tool_environment_variable_fills_what_the_user_has_not_set(monkeypatch):
    monkeypatch.setenv("TOOL_DOCS_KEY", "operator-key-456")
    ctx = context()
    assert call_headers({"X-Key": "${TOOL_DOCS_KEY}"}, ctx) == {"X-Key": "operator-key-456"}
    assert ctx.secrets_seen.values() == frozenset({"operator-key-456"})


def test_the_users_secret_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("TOOL_DOCS_KEY", "operator-key-456")
    headers = call_headers({"X-Key": "${TOOL_DOCS_KEY}"}, context(tool_docs_key="mine-789"))
    assert headers == {"X-Key": "mine-789"}


def test_other_environment_variables_are_never_read(monkeypatch):
    monkeypatch.setenv("DATABASE_PASSWORD", "do-not-leak")
    with pytest.raises(ToolError) as raised:
        call_headers({"X-Key": "${DATABASE_PASSWORD}"}, context())
    assert "do-not-leak" not in str(raised.value)
    assert str(raised.value) == (
        "this tool needs ${DATABASE_PASSWORD}, which is not set: the user can add a secret named "
        "'database_password' (an operator's value needs the placeholder ${TOOL_DATABASE_PASSWORD} and the "
        "environment variable TOOL_DATABASE_PASSWORD: only TOOL_ variables are read)"
    )


def advised(error: ToolError) -> tuple[str, str | None]:
    """The placeholder and the environment variable a missing-value error tells the operator to use."""
    variable = re.search(r"(?:configure|the environment variable) (\w+)", str(error))
    placeholder = re.search(r"needs the placeholder (\$\{\w+\})", str(error))
    return (placeholder.group(1) if placeholder else "", variable.group(1) if variable else None)


@pytest.mark.parametrize("placeholder", ["${TOOL_DOCS_KEY}", "${DOCS_KEY}"])
def test_the_environment_variable_the_error_advises_is_the_one_read(monkeypatch, placeholder):
    with pytest.raises(ToolError) as raised:
        call_headers({"X-Key": placeholder}, context())
    new_placeholder, variable = advised(raised.value)
    assert variable is not None, str(raised.value)

    monkeypatch.setenv(variable, "operator-key-456")
    ctx = context()
    assert call_headers({"X-Key": new_placeholder or placeholder}, ctx) == {"X-Key": "operator-key-456"}
    assert ctx.secrets_seen.values() == frozenset({"operator-key-456"})


def test_a_tool_placeholder_is_advised_as_the_variable_of_its_own_name():
    with pytest.raises(ToolError) as raised:
        call_headers({"X-Key": "${TOOL_DOCS_KEY}"}, context())
    assert str(raised.value) == (
        "this tool needs ${TOOL_DOCS_KEY}, which is not set: the user can add a secret named 'tool_docs_key', "
        "or the operator can set the environment variable TOOL_DOCS_KEY"
    )


def test_a_value_with_a_line_break_cannot_be_sent_as_a_header():
    with pytest.raises(ToolError, match="line break"):
        call_headers({"Authorization": "Bearer ${DOCS_TOKEN}"}, context(docs_token="abc\r\nX-Evil: 1"))


def test_discovery_sends_what_it_can_fill_and_names_what_it_left_out(monkeypatch):
    monkeypatch.setenv("TOOL_DOCS_KEY", "operator-key-456")
    ctx = ToolContext()
    headers, left_out = discovery_headers(
        {"X-Key": "${TOOL_DOCS_KEY}", "Authorization": "Bearer ${DOCS_TOKEN}", "Accept-Language": "en"}, ctx
    )
    assert headers == {"X-Key": "operator-key-456", "Accept-Language": "en"}
    assert left_out == ["Authorization"]
    assert ctx.secrets_seen.values() == frozenset({"operator-key-456"})
