"""A long run followed on one websocket stays on that websocket.

The distributed stack (real uvicorn, real Celery workers, Postgres, Redis)
streams a run for over 30 s. A client that reconnects whenever the server
closes early, as a real client would, must not have to: the run socket and
the conversation socket both stay up until the terminal event, and the run
socket then closes with 1000. (Before run sockets left the channel layer,
redis-py's 5 s socket timeout tore every socket down about every 5 s.)
A server that shuts down closes its sockets with 1012, and the client
resumes on another server without losing or repeating an event.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient, follow_run, run_socket_url
from tests.support.stack import free_port, start_server

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TERMINAL = {"run.completed", "run.failed", "run.cancelled"}
WORDS = 160
WORD_DELAY_S = 0.2  # 160 words, one every 0.2 s: the model streams for about 32 s
MAX_CONNECTS = 30  # a client that keeps being cut off gives up, so the test ends


@dataclass
class Followed:
    """What one client saw: its events, and every close the server sent
    (code, or None without a close frame; and whether it came before the
    terminal event)."""

    events: list[dict] = field(default_factory=list)
    closes: list[tuple[int | None, bool]] = field(default_factory=list)
    connects: int = 0

    @property
    def early_closes(self) -> list[int | None]:
        return [code for code, early in self.closes if early]


def _close_code(exc: ConnectionClosed) -> int | None:
    return exc.rcvd.code if exc.rcvd is not None else None


def follow_resuming(ws_base: str, run_id: str, token: str) -> Followed:
    """Follow a run like a real client: on an early close, resume with ``after``."""
    seen = Followed()
    while seen.connects < MAX_CONNECTS:
        after = seen.events[-1]["seq"] if seen.events else None
        seen.connects += 1
        with connect(run_socket_url(ws_base, run_id, after),
                     additional_headers={"Authorization": f"Bearer {token}"}, open_timeout=10) as ws:
            try:
                while True:
                    seen.events.append(json.loads(ws.recv(timeout=60)))
            except ConnectionClosed as exc:
                ended = bool(seen.events) and seen.events[-1]["type"] in TERMINAL
                seen.closes.append((_close_code(exc), not ended))
        if seen.events and seen.events[-1]["type"] in TERMINAL:
            break
    return seen


def follow_conversation(ws_base: str, conversation_id: str, token: str, run_id: str) -> Followed:
    """The conversation socket until ``run_id``'s terminal event; then the client leaves."""
    seen = Followed(connects=1)
    with connect(f"{ws_base}/ws/conversations/{conversation_id}/",
                 additional_headers={"Authorization": f"Bearer {token}"}, open_timeout=10) as ws:
        try:
            while not (seen.events and seen.events[-1]["type"] in TERMINAL):
                event = json.loads(ws.recv(timeout=60))
                if event["run_id"] == run_id:
                    seen.events.append(event)
        except ConnectionClosed as exc:
            seen.closes.append((_close_code(exc), True))
    return seen


def test_a_32_second_run_on_one_run_socket_and_one_conversation_socket(stack, fake_llm, make_user):
    fake_llm.add_script("lifetime-long", [Reply(text=" ".join(f"w{i}" for i in range(WORDS)),
                                                chunk_delay_s=WORD_DELAY_S)])
    _, token = make_user()
    api = ApiClient(stack.http_url, token)
    conversation_id = api.new_conversation()
    run_id = api.post_message(conversation_id, "talk for a while", model="lifetime-long")["run_id"]

    on_conversation: list[Followed] = []
    watcher = threading.Thread(
        target=lambda: on_conversation.append(follow_conversation(stack.ws_url, conversation_id, token, run_id)))
    watcher.start()
    on_run = follow_resuming(stack.ws_url, run_id, token)
    watcher.join(120)

    assert on_run.early_closes == [], stack.logs()
    assert on_run.connects == 1  # no reconnects
    seqs = [e["seq"] for e in on_run.events]
    assert seqs == list(range(1, len(seqs) + 1))
    assert sum(e["type"] == "content.delta" for e in on_run.events) == WORDS
    assert on_run.events[-1]["type"] == "run.completed"
    assert on_run.closes == [(1000, False)]

    assert len(on_conversation) == 1
    conversation = on_conversation[0]
    assert conversation.early_closes == []
    assert [e["seq"] for e in conversation.events] == seqs
    assert "Task exception was never retrieved" not in stack.process("server").log()


def test_a_server_shutting_down_closes_with_1012_and_the_client_resumes_elsewhere(stack, fake_llm, make_user):
    fake_llm.add_script("lifetime-shutdown", [Reply(text=" ".join(f"s{i}" for i in range(60)), chunk_delay_s=0.1)])
    _, token = make_user()
    api = ApiClient(stack.http_url, token)
    # The server first: started after the run, on a loaded machine it came
    # up after the run's 6 s had passed, and the socket then closed with
    # 1000 at the run's end before the server was told to stop.
    port = free_port()
    leaving = start_server(port=port, env=stack.env, log_dir=stack.log_dir, name="server-leaving")
    run_id = api.post_message(api.new_conversation(), "talk", model="lifetime-shutdown")["run_id"]

    events: list[dict] = []
    with connect(run_socket_url(f"ws://127.0.0.1:{port}", run_id),
                 additional_headers={"Authorization": f"Bearer {token}"}, open_timeout=10) as ws:
        while len(events) < 5:
            events.append(json.loads(ws.recv(timeout=30)))
        leaving.stop()  # SIGTERM: uvicorn's graceful shutdown
        try:
            while True:
                events.append(json.loads(ws.recv(timeout=30)))
        except ConnectionClosed as exc:
            code = _close_code(exc)
    assert code == 1012
    log = leaving.log()
    assert "Finished server process" in log  # it did not have to be killed
    assert "Task exception was never retrieved" not in log and "Exception in ASGI application" not in log

    events += follow_run(stack.ws_url, run_id, token, after=events[-1]["seq"])
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["type"] == "run.completed"
