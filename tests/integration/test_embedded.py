"""Embedded mode: with neither DATABASE_URL nor REDIS_URL the single server
process runs the whole system (SQLite, in-memory broker and worker threads,
in-memory event log) and completes a run with tool calls."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.client import ApiClient, follow_run
from tests.support.stack import ROOT, base_env, embedded_server, free_port, start_server

pytestmark = pytest.mark.integration


def test_embedded_server_completes_a_run_with_tools():
    with embedded_server(prefix="chatforge-embedded-", CHATFORGE_DEMO_TOKEN_DELAY_S="0") as server:
        try:
            api = ApiClient(server.url, server.token)
            assert api.request("GET", "/readyz").json()["mode"] == "embedded"
            accepted = api.post_message(api.new_conversation(), "What time is it in Tokyo, and what is 17*23?")

            events = follow_run(server.url.replace("http://", "ws://"), accepted["run_id"], server.token)

            assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
            assert events[0]["type"] == "run.started" and events[-1]["type"] == "run.completed"
            calls = {e["data"]["name"]: e["data"] for e in events if e["type"] == "tool_call"}
            assert set(calls) == {"get_time", "calculator"}
            outputs = [e["data"] for e in events if e["type"] == "tool_output"]
            assert {o["tool_call_id"] for o in outputs} == {c["id"] for c in calls.values()}
            answer = "".join(e["data"]["text"] for e in events if e["type"] == "content.delta")
            assert "391" in answer
            conversation = accepted["conversation_id"]
            messages = api.request("GET", f"/api/conversations/{conversation}/messages/").json()["results"]
            assert messages[1]["role"] == "assistant" and "391" in messages[1]["content"]
            assert len(messages[1]["tool_rounds"]) == 1
        finally:
            print(server.process.log()[-3000:])


def test_the_server_runs_on_uvloop_with_the_httptools_parser():
    """The event loop and HTTP parser ``serve`` asks uvicorn for are the
    compiled ones, loaded in the serving process (docs/performance.md)."""
    workdir = Path(tempfile.mkdtemp(prefix="chatforge-embedded-"))
    env = base_env(CHATFORGE_SQLITE_PATH=str(workdir / "db.sqlite3"))
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    server = start_server(port=free_port(), env=env, log_dir=workdir)
    try:
        mapped = Path(f"/proc/{server.popen.pid}/maps").read_text()
        assert "/uvloop/loop." in mapped and "/httptools/parser/" in mapped, server.log()[-2000:]
    finally:
        server.stop()
