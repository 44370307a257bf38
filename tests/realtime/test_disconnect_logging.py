"""A client that goes away mid-run — a page reloaded, a tab closed, a
dropped connection, on the run socket, the conversation socket or SSE —
is routine: the server logs it at INFO at most, never an ERROR or a
traceback, and the run goes on."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest
from websockets.sync.client import connect

from chatforge.conversations.models import Run
from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient, follow_run
from tests.support.logs import assert_no_error_logged
from tests.support.stack import embedded_server

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
    with embedded_server(prefix="chatforge-leaving-", CHATFORGE_DEMO_TOKEN_DELAY_S="0.05",
                         CHATFORGE_LOG_LEVEL="INFO") as server:
        ws_url = server.url.replace("http://", "ws://")
        api = ApiClient(server.url, server.token)
        conversation = api.new_conversation()
        run_id = api.post_message(conversation, "What time is it in Tokyo, and what is 17*23?")["run_id"]
        leave_mid_run(server.url, ws_url, server.token, conversation, run_id)
        events = follow_run(ws_url, run_id, server.token)
        assert events[-1]["type"] == "run.completed"
        time.sleep(1)
    assert_no_error_logged(server.process.log())
