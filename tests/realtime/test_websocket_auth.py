"""Websocket sign-in and the Origin rule, and the resume point, through the
whole websocket application (session middleware, token auth, routing,
consumer); the same over a real uvicorn with real clients, where the
refusals are HTTP answers with a JSON body and the access log keeps no token.

- A socket signed in with the session cookie must come from an allowed
  origin: scheme, host and port all count, and no Origin is no entry.
- A token socket may come without an Origin (programs send none); one that
  sends an Origin must send an allowed one.
- Browsers can send the token as the subprotocol pair
  ``["chatforge.bearer", token]``; the socket is accepted with
  ``chatforge.bearer`` and the token is never echoed.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from django.conf import settings as django_settings
from django.test import Client, override_settings
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from chatforge.realtime import close_codes
from chatforge.realtime.routing import websocket_application
from tests.realtime.communicator import WebsocketCommunicator
from tests.support.client import ApiClient

pytestmark = pytest.mark.django_db(transaction=True)

SERVED = "127.0.0.1:8000"


@pytest.fixture
def owner(make_user, idle_broker):
    """A user with a run, a token and a signed-in session cookie."""
    from rest_framework.test import APIClient

    user, token = make_user()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    conversation = api.post("/api/conversations/", {}, format="json").json()["id"]
    run = api.post(f"/api/conversations/{conversation}/messages/", {"content": "hi"}, format="json").json()["run_id"]
    browser = Client()
    browser.force_login(user)
    cookie = f"{django_settings.SESSION_COOKIE_NAME}={browser.cookies[django_settings.SESSION_COOKIE_NAME].value}"
    return {"token": token, "run": run, "cookie": cookie}


def _outcome(path: str, *, headers: list[tuple[bytes, bytes]], subprotocols: list[str] | None = None,
             client: str = "127.0.0.1") -> tuple:
    """("accept", subprotocol) or ("refused", close code)."""

    async def attempt():
        communicator = WebsocketCommunicator(websocket_application, path, headers=[(b"host", SERVED.encode()),
                                                                                   *headers],
                                             subprotocols=subprotocols)
        communicator.scope["client"] = (client, 50000)  # read when the application starts
        connected, detail = await communicator.connect(timeout=5)
        if not connected:
            return "refused", detail
        # Refusals with a reason are accepted and closed at once where the
        # server cannot answer HTTP (this communicator cannot).
        if not await communicator.receive_nothing(timeout=0.3):
            message = await communicator.receive_output(timeout=1)
            if message["type"] == "websocket.close":
                return "refused", message["code"]
        await communicator.disconnect()
        return "accept", detail

    return asyncio.run(attempt())


def _cookie(owner, origin: str | None) -> list[tuple[bytes, bytes]]:
    headers = [(b"cookie", owner["cookie"].encode())]
    return headers + ([(b"origin", origin.encode())] if origin is not None else [])


@pytest.mark.parametrize("origin", ["http://127.0.0.1:1", "https://127.0.0.1:8000", "http://localhost:3000",
                                    "https://127.0.0.1", "null", "http://127.0.0.1:8000.evil.example", None])
def test_a_cookie_socket_from_another_origin_or_none_is_refused(owner, origin):
    outcome = _outcome(f"/ws/runs/{owner['run']}/", headers=_cookie(owner, origin))
    assert outcome == ("refused", close_codes.FORBIDDEN)


@pytest.mark.parametrize("origin", ["http://127.0.0.1:8000", "HTTP://127.0.0.1:8000"])
def test_a_cookie_socket_from_the_served_origin_is_accepted(owner, origin):
    assert _outcome(f"/ws/runs/{owner['run']}/", headers=_cookie(owner, origin))[0] == "accept"


def test_configured_origins_replace_the_served_one(owner):
    with override_settings(CHATFORGE_ALLOWED_ORIGINS=["https://chat.example.com"]):
        path = f"/ws/runs/{owner['run']}/"
        assert _outcome(path, headers=_cookie(owner, "https://chat.example.com:443"))[0] == "accept"
        assert _outcome(path, headers=_cookie(owner, "http://127.0.0.1:8000")) == ("refused", close_codes.FORBIDDEN)


def test_token_sockets_need_no_origin_but_a_sent_one_must_be_allowed(owner):
    path = f"/ws/runs/{owner['run']}/"
    bearer = [(b"authorization", f"Bearer {owner['token']}".encode())]
    assert _outcome(path, headers=bearer)[0] == "accept"
    assert _outcome(path, headers=[*bearer, (b"origin", b"http://127.0.0.1:8000")])[0] == "accept"
    assert _outcome(path, headers=[*bearer, (b"origin", b"http://evil.example")]) == ("refused", close_codes.FORBIDDEN)


def test_the_token_as_subprotocol_is_accepted_with_the_protocol_name_only(owner):
    outcome = _outcome(f"/ws/runs/{owner['run']}/", headers=[], subprotocols=["chatforge.bearer", owner["token"]])
    assert outcome == ("accept", "chatforge.bearer")
    bad = _outcome(f"/ws/runs/{owner['run']}/", headers=[], subprotocols=["chatforge.bearer", "cf_not-a-token"])
    assert bad == ("refused", close_codes.UNAUTHENTICATED)


def test_an_invalid_token_is_not_rescued_by_a_cookie(owner):
    headers = [*_cookie(owner, "http://127.0.0.1:8000"), (b"authorization", b"Bearer cf_wrong")]
    assert _outcome(f"/ws/runs/{owner['run']}/", headers=headers) == ("refused", close_codes.UNAUTHENTICATED)


def test_too_many_bad_tokens_are_refused_4429(owner):
    with override_settings(CHATFORGE_AUTH_FAILURE_LIMIT=1, CHATFORGE_AUTH_FAILURE_WINDOW_S=600):
        path = f"/ws/runs/{owner['run']}/?token=cf_wrong"
        address = f"2001:db8::{uuid.uuid4().hex[:4]}"  # counts outlive a test run
        outcomes = [_outcome(path, headers=[], client=address) for _ in range(3)]
    assert outcomes == [("refused", close_codes.UNAUTHENTICATED), ("refused", close_codes.TOO_MANY_REQUESTS),
                        ("refused", close_codes.TOO_MANY_REQUESTS)]


@pytest.mark.parametrize("after", ["18446744073709551616", "-1", "abc", "1e3", "9223372036854775808"])
def test_a_resume_point_that_is_not_a_seq_is_refused_4400(owner, after):
    bearer = [(b"authorization", f"Bearer {owner['token']}".encode())]
    outcome = _outcome(f"/ws/runs/{owner['run']}/?after={after}", headers=bearer)
    assert outcome == ("refused", close_codes.BAD_REQUEST)


def test_the_largest_seq_is_a_valid_resume_point(owner):
    bearer = [(b"authorization", f"Bearer {owner['token']}".encode())]
    assert _outcome(f"/ws/runs/{owner['run']}/?after={2**63 - 1}", headers=bearer)[0] == "accept"


# ---------------------------------------------------------------- a real server


@pytest.mark.integration
def test_over_uvicorn_refusals_are_http_answers_and_no_token_reaches_the_log(stack, make_user):
    _, token = make_user()
    api = ApiClient(stack.http_url, token)
    conversation = api.new_conversation()
    run = api.post_message(conversation, "hello")["run_id"]
    ws = stack.http_url.replace("http://", "ws://")

    # The subprotocol handshake: accepted with the protocol name, events flow.
    with connect(f"{ws}/ws/runs/{run}/", subprotocols=["chatforge.bearer", token], open_timeout=10) as socket:
        assert socket.subprotocol == "chatforge.bearer"
        assert json.loads(socket.recv(timeout=30))["type"] == "run.started"

    # The old query-string token still works, and is not logged.
    with connect(f"{ws}/ws/runs/{run}/?token={token}", open_timeout=10) as socket:
        assert json.loads(socket.recv(timeout=30))["type"] == "run.started"
    assert api.request("GET", f"/api/runs/{run}/?token={token}&api_key=sk-should-not-appear").status_code == 200

    with pytest.raises(InvalidStatus) as refused:
        with connect(f"{ws}/ws/runs/{run}/?after=18446744073709551616",
                     additional_headers={"Authorization": f"Bearer {token}"}, open_timeout=10):
            pass
    assert refused.value.response.status_code == 400
    assert "event seq" in json.loads(refused.value.response.body)["error"]["message"]

    with pytest.raises(InvalidStatus) as refused:
        with connect(f"{ws}/ws/runs/{run}/", additional_headers={"Authorization": f"Bearer {token}"},
                     origin="http://evil.example", open_timeout=10):
            pass
    assert refused.value.response.status_code == 403
    assert json.loads(refused.value.response.body)["error"]["code"] == "origin_not_allowed"

    logs = "\n".join(process.log() for process in stack.processes)
    assert f"/ws/runs/{run}/?token=[redacted]" in logs  # the line is there...
    assert token not in logs and "sk-should-not-appear" not in logs  # ...the credentials are not
