"""An LLM worker imports the provider SDKs when it starts (not on its first
turn, where the import stalled every turn on the gevent hub); the tools
worker does not load them."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration

LINE = "provider SDKs imported at start-up"


def _records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_the_llm_worker_imports_the_sdks_at_start_and_the_tools_worker_does_not(stack):
    llm = [r for r in _records(stack.process("llm").log()) if r.get("event") == LINE]
    assert len(llm) == 1, stack.process("llm").log()[-3000:]
    assert llm[0]["seconds"] >= 0
    assert not [r for r in _records(stack.process("tools").log()) if r.get("event") == LINE]


def test_the_gevent_worker_waits_on_the_database_without_the_hub_first(stack):
    """psycopg's cooperative wait (chatforge/workers/gevent_db_wait.py): in the
    gevent LLM worker only; a prefork or threads worker keeps psycopg's C wait."""
    line = "database waits ask the operating system before the hub"
    assert [r for r in _records(stack.process("llm").log()) if r.get("event") == line]
    for other in ("tools", "tools-io"):
        assert not [r for r in _records(stack.process(other).log()) if r.get("event") == line]

