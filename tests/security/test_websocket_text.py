"""Websockets get the same rule as HTTP for text Postgres cannot hold: a
NUL in the URL refuses the handshake with 400 (4400 where the server
cannot answer HTTP), a cookie holding one is ignored (the handshake used to
fail with an exception while the session was read), and an ``approval``
message naming a call with a NUL is answered with an error message (the
decision's query failed and the socket closed with 1011)."""

from __future__ import annotations

import asyncio
import json

import pytest
from django.test import Client

from chatforge.realtime import close_codes
from chatforge.realtime.routing import websocket_application
from tests.realtime.communicator import WebsocketCommunicator

pytestmark = pytest.mark.django_db(transaction=True)

NUL_COOKIE = b'sessionid="\\000\\000\\000\\000\\000\\000\\000\\000\\000\\000"'


@pytest.fixture
def owned_run(make_user, idle_broker, settings) -> tuple[str, str, str]:
    """(token, conversation id, run id) of a user with a queued run."""
    settings.CHATFORGE_MESSAGE_RATE = ""
    _, token = make_user()
    api = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    conversation = api.post("/api/conversations/", {}, content_type="application/json").json()["id"]
    accepted = api.post(f"/api/conversations/{conversation}/messages/", {"content": "hi"},
                        content_type="application/json")
    assert accepted.status_code == 202, accepted.content
    return token, conversation, accepted.json()["run_id"]


def _handshake(path: str, headers: list[tuple[bytes, bytes]]) -> str:
    async def connect() -> str:
        communicator = WebsocketCommunicator(websocket_application, path, headers=headers)
        connected, code = await communicator.connect(timeout=5)
        if not connected:
            return str(code)
        # Refusals that carry a reason are accepted, then closed at once (no HTTP
        # answer here); an open socket answers an unknown message with an error.
        await communicator.send_to(text_data="{}")
        output = await communicator.receive_output(timeout=5)
        await communicator.disconnect()
        return str(output.get("code")) if output["type"] == "websocket.close" else "accept"

    return asyncio.run(connect())


@pytest.mark.parametrize("path", ["/ws/runs/a%00b/", "/ws/conversations/%00/", "/ws/runs/{run}/?after=%00",
                                  "/ws/runs/{run}/?x%00=1"])
def test_a_nul_in_the_url_refuses_the_handshake_with_4400(owned_run, path):
    token, _, run = owned_run
    headers = [(b"authorization", f"Bearer {token}".encode())]
    assert _handshake(path.format(run=run), headers) == str(close_codes.BAD_REQUEST)


def test_a_cookie_holding_a_nul_is_ignored(owned_run):
    token, conversation, run = owned_run
    bearer = (b"authorization", f"Bearer {token}".encode())
    # With a token beside it, the socket is the token's.
    assert _handshake(f"/ws/runs/{run}/", [(b"cookie", NUL_COOKIE), bearer]) == "accept"
    assert _handshake(f"/ws/conversations/{conversation}/", [(b"cookie", NUL_COOKIE), bearer]) == "accept"
    # Alone, it signs nobody in.
    assert _handshake(f"/ws/conversations/{conversation}/", [(b"cookie", NUL_COOKIE)]) == str(
        close_codes.UNAUTHENTICATED)


def test_an_approval_naming_a_call_with_a_nul_is_answered_with_an_error(owned_run):
    token, _, run = owned_run

    async def approve() -> dict:
        communicator = WebsocketCommunicator(websocket_application, f"/ws/runs/{run}/",
                                             headers=[(b"authorization", f"Bearer {token}".encode())])
        connected, _ = await communicator.connect(timeout=5)
        assert connected
        await communicator.send_to(text_data=json.dumps(
            {"type": "approval", "tool_call_id": "call\x00", "decision": "approve", "reason": "ok"}))
        while True:  # the run's own events may come first
            output = await communicator.receive_output(timeout=10)
            assert output["type"] == "websocket.send", output  # not closed (1011)
            message = json.loads(output["text"])
            if message["type"] == "error":
                await communicator.disconnect()
                return message

    message = asyncio.run(approve())
    assert "tool_call_id" in message["data"]["message"] and "NUL" in message["data"]["message"]
