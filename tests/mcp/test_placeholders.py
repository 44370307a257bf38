"""${NAME} placeholders in a server's headers: the HTTP tools' one mechanism,
filled from the calling user's secrets or TOOL_ environment variables, every
value recorded for scrubbing; discovery sends only what needs no user."""

from __future__ import annotations

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
        "'database_password', or the operator can configure DATABASE_PASSWORD"
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
