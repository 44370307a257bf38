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
from tests.support.stack import ROOT, base_env, free_port, start_server

pytestmark = pytest.mark.integration


def test_embedded_server_completes_a_run_with_tools():
    workdir = Path(tempfile.mkdtemp(prefix="chatforge-embedded-"))
    env = base_env(CHATFORGE_SQLITE_PATH=str(workdir / "db.sqlite3"), CHATFORGE_DEMO_TOKEN_DELAY_S="0")
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    token = subprocess.run(
        [*manage, "create_demo_user", "--token-only"], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    port = free_port()
    server = start_server(port=port, env=env, log_dir=workdir)
    try:
        api = ApiClient(f"http://127.0.0.1:{port}", token)
        assert api.request("GET", "/readyz").json()["mode"] == "embedded"
        accepted = api.post_message(api.new_conversation(), "What time is it in Tokyo, and what is 17*23?")

        events = follow_run(f"ws://127.0.0.1:{port}", accepted["run_id"], token)

        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert events[0]["type"] == "run.started" and events[-1]["type"] == "run.completed"
        calls = {e["data"]["name"]: e["data"] for e in events if e["type"] == "tool_call"}
        assert set(calls) == {"get_time", "calculator"}
        outputs = [e["data"] for e in events if e["type"] == "tool_output"]
        assert {o["tool_call_id"] for o in outputs} == {c["id"] for c in calls.values()}
        answer = "".join(e["data"]["text"] for e in events if e["type"] == "content.delta")
        assert "391" in answer
        messages = api.request("GET", f"/api/conversations/{accepted['conversation_id']}/messages/").json()["results"]
        assert messages[1]["role"] == "assistant" and "391" in messages[1]["content"]
        assert len(messages[1]["tool_rounds"]) == 1
    finally:
        server.stop()
        print(server.log()[-3000:])


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
