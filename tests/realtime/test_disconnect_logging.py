"""A client that goes away mid-run — a page reloaded, a tab closed, a
dropped connection, on the run socket, the conversation socket or SSE —
is routine: the server logs it at INFO at most, never an ERROR or a
traceback, and the run goes on."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest
from websockets.sync.client import connect

from chatforge.conversations.models import Run
from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient, follow_run
from tests.support.stack import ROOT, base_env, free_port, start_server
from tests.support.logs import assert_no_error_logged

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def drop_without_close_frame(ws) -> None:
    """What a killed tab does: the TCP connection ends with no close frame."""
    ws.socket.shutdown(socket.SHUT_RDWR)
    ws.socket.close()


def leave_mid_run(http_url: str, ws_url: str, token: str, conversation: str, run_id: str) -> None:
    """Each way a watcher goes away while the run streams."""
    headers = {"Authorization": f"Bearer {token}"}
    for path in (f"/ws/runs/{run_id}/", f"/ws/conversations/{conversation}/"):
        reload_like = connect(f"{ws_url}{path}", additional_headers=headers, open_timeout=10)
        json.loads(reload_like.recv(timeout=30))
        reload_like.close(code=1001)  # a browser's reload: "going away"
        dropped = connect(f"{ws_url}{path}", additional_headers=headers, open_timeout=10)
        json.loads(dropped.recv(timeout=30))
        drop_without_close_frame(dropped)
    with httpx.stream("GET", f"{http_url}/api/runs/{run_id}/events/", headers=headers, timeout=30) as sse:
        next(sse.iter_lines())  # then leave mid-stream


def test_clients_leaving_mid_run_log_no_error(stack, fake_llm, make_user):
    fake_llm.add_script("leaving", [Reply(text=" ".join(f"w{i}" for i in range(60)), chunk_delay_s=0.05)])
    _, token = make_user()
    api = ApiClient(stack.http_url, token)
    conversation = api.new_conversation()
    run_id = api.post_message(conversation, "talk", model="leaving")["run_id"]
    server = stack.process("server")
    log_before = len(server.log())

    leave_mid_run(stack.http_url, stack.ws_url, token, conversation, run_id)

    deadline = time.monotonic() + 60
    while Run.objects.get(pk=run_id).status not in Run.TERMINAL:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert Run.objects.get(pk=run_id).status == "completed"  # watchers leaving does not stop a run
    time.sleep(1)  # let the server finish logging the goodbyes
    assert_no_error_logged(server.log()[log_before:])


def test_clients_leaving_mid_run_log_no_error_in_embedded_mode():
    """The same in ``make run``'s one process (in-memory event log and worker threads)."""
    workdir = Path(tempfile.mkdtemp(prefix="chatforge-leaving-"))
    env = base_env(CHATFORGE_SQLITE_PATH=str(workdir / "db.sqlite3"), CHATFORGE_DEMO_TOKEN_DELAY_S="0.05",
                   CHATFORGE_LOG_LEVEL="INFO")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    token = subprocess.run([sys.executable, "manage.py", "create_demo_user", "--token-only"], cwd=ROOT, env=env,
                           check=True, capture_output=True, text=True).stdout.strip()
    port = free_port()
    server = start_server(port=port, env=env, log_dir=workdir)
    try:
        api = ApiClient(f"http://127.0.0.1:{port}", token)
        conversation = api.new_conversation()
        run_id = api.post_message(conversation, "What time is it in Tokyo, and what is 17*23?")["run_id"]
        leave_mid_run(f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}", token, conversation, run_id)
        events = follow_run(f"ws://127.0.0.1:{port}", run_id, token)
        assert events[-1]["type"] == "run.completed"
        time.sleep(1)
    finally:
        server.stop()
    assert_no_error_logged(server.log())
