"""Deleting a conversation with a run streaming: the run is cancelled first,
every stream following it ends, the model call stops, and the user's
active-run cap no longer counts it. Real workers, server and clients."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from chatforge.conversations.models import Run
from tests.fakes.openai_server import Reply
from websockets.sync.client import connect

from tests.support.client import ApiClient, run_socket_url
from tests.support.stack import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_delete_cancels_the_streaming_run_and_ends_every_stream(stack, fake_llm, make_user):
    fake_llm.add_script("delete-mid-stream", [Reply(text="word " * 600, chunk_delay_s=0.05)])
    user, token = make_user()
    api = ApiClient(stack.http_url, token)
    v1_chunks: list[str] = []

    def v1_stream() -> None:
        with httpx.stream("POST", f"{stack.http_url}/v1/chat/completions", timeout=60,
                          headers={"Authorization": f"Bearer {token}"},
                          json={"model": "delete-mid-stream", "stream": True,
                                "messages": [{"role": "user", "content": "talk for a while"}]}) as response:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    v1_chunks.append(line[len("data: "):])

    client = threading.Thread(target=v1_stream)
    client.start()
    wait_for(lambda: Run.objects.filter(user=user, status="running").exists(), timeout=30, what="the run to start")
    run = Run.objects.get(user=user)
    socket_events: list[dict] = []

    def follow() -> None:
        with connect(run_socket_url(stack.ws_url, str(run.id)),
                     additional_headers={"Authorization": f"Bearer {token}"}) as ws:
            for message in ws:
                socket_events.append(json.loads(message))

    follower = threading.Thread(target=follow)
    follower.start()
    wait_for(lambda: any(e["type"] == "content.delta" for e in socket_events), timeout=30, what="streamed text")

    response = api.request("DELETE", f"/api/conversations/{run.conversation_id}/")

    assert response.status_code == 204
    assert not Run.objects.filter(pk=run.pk).exists()
    # The cap counts what is running: the five allowed runs can start at once.
    for _ in range(5):
        api.post_message(api.new_conversation(), "hi", model="demo")
    client.join(60)
    follower.join(60)
    assert not client.is_alive() and not follower.is_alive()
    assert socket_events[-1]["type"] == "run.cancelled"
    assert [e["seq"] for e in socket_events] == list(range(1, len(socket_events) + 1))
    last = json.loads(v1_chunks[-1])
    assert last["error"]["code"] == "run_cancelled"
    # The model was cut off long before its 600 words (30 s of chunks).
    streamed = sum(1 for e in socket_events if e["type"] == "content.delta")
    assert streamed < 600
