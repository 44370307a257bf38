"""A websocket handshake while Postgres is down is refused with 503.

End to end: a real uvicorn server on a private Postgres that the test
stops and starts again; the ``websockets`` client sees the 503, its
``Retry-After`` and the JSON error body. In process: ``HandshakeGuard``'s
answer to each kind of failure, with and without the server's
"websocket.http.response" extension.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from asgiref.testing import ApplicationCommunicator
from django.conf import settings
from django.db import OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from chatforge.realtime import close_codes
from chatforge.realtime.handshake import RETRY_AFTER_S, HandshakeGuard
from tests.support.private_services import private_postgres
from tests.support.stack import ROOT, TEST_SECRET_KEYS, base_env, free_port, start_server

# ---------------------------------------------------------------- end to end


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True,
                          capture_output=True, text=True, timeout=180)
    return done.stdout.strip()


def _refusal(url: str, **headers: str) -> InvalidStatus:
    with pytest.raises(InvalidStatus) as refused, connect(url, additional_headers=headers, open_timeout=30):
        pass
    return refused.value


@pytest.mark.integration
def test_handshakes_during_a_database_outage_get_503_json_with_retry_after():
    with private_postgres() as pg:
        pg.execute("CREATE DATABASE chatforge")
        env = base_env(DATABASE_URL=pg.url("chatforge"), REDIS_URL=settings.REDIS_URL,
                       DJANGO_SECRET_KEY="handshake-tests-secret-key-0123456789-abcdef",
                       CHATFORGE_SECRET_KEYS=TEST_SECRET_KEYS, CHATFORGE_LOG_LEVEL="INFO")
        _manage(env, "migrate", "-v", "0")
        token = _manage(env, "create_demo_user", "--token-only")
        port = free_port()
        server = start_server(port=port, env=env, log_dir=Path(tempfile.mkdtemp(prefix="chatforge-handshake-")))
        try:
            run_url = f"ws://127.0.0.1:{port}/ws/runs/{uuid.uuid4()}/"
            conversation_url = f"ws://127.0.0.1:{port}/ws/conversations/{uuid.uuid4()}/"
            bearer = {"Authorization": f"Bearer {token}"}
            # Database up: an unknown run is refused as before (403).
            assert _refusal(run_url, **bearer).response.status_code == 403

            pg.stop()
            for refused in (_refusal(run_url, **bearer), _refusal(f"{run_url}?token={token}"),
                            _refusal(conversation_url, **bearer)):
                response = refused.response
                assert response.status_code == 503, server.log()[-3000:]
                assert response.headers["Retry-After"] == str(RETRY_AFTER_S)
                assert response.headers["Content-Type"] == "application/json"
                error = json.loads(response.body)["error"]
                assert error["code"] == "service_unavailable"
                assert error["message"]

            pg.start()
            assert _refusal(run_url, **bearer).response.status_code == 403  # back to normal
            assert "Exception in ASGI application" not in server.log()
        finally:
            server.stop()


# ---------------------------------------------------------------- in process


def _failing(exc: Exception, *, accept_first: bool = False):
    async def app(scope, receive, send):
        await receive()
        if accept_first:
            await send({"type": "websocket.accept"})
        raise exc

    return app


async def _answer(app, *, extensions: dict | None) -> list[dict]:
    scope = {"type": "websocket", "path": "/ws/runs/x/", "headers": [], "query_string": b""}
    if extensions is not None:
        scope["extensions"] = extensions
    communicator = ApplicationCommunicator(HandshakeGuard(app), scope)
    await communicator.send_input({"type": "websocket.connect"})
    await communicator.wait(timeout=5)
    sent = []
    while not communicator.output_queue.empty():
        sent.append(communicator.output_queue.get_nowait())
    return sent


@pytest.mark.asyncio
@pytest.mark.parametrize("exc", [OperationalError("connection refused"), RedisConnectionError("refused")])
async def test_an_outage_is_denied_with_503_when_the_server_can_send_http(exc):
    start, body = await _answer(_failing(exc), extensions={"websocket.http.response": {}})
    assert start["type"] == "websocket.http.response.start"
    assert start["status"] == 503
    headers = dict(start["headers"])
    assert headers[b"retry-after"] == str(RETRY_AFTER_S).encode()
    assert headers[b"content-type"] == b"application/json"
    assert body["type"] == "websocket.http.response.body"
    assert json.loads(body["body"])["error"]["code"] == "service_unavailable"


@pytest.mark.asyncio
async def test_without_the_extension_an_outage_is_accepted_then_closed_1013():
    sent = await _answer(_failing(OperationalError("connection refused")), extensions={})
    assert [m["type"] for m in sent] == ["websocket.accept", "websocket.close"]
    assert sent[1]["code"] == close_codes.TRY_AGAIN_LATER


@pytest.mark.asyncio
async def test_other_failures_and_failures_after_the_handshake_are_not_the_guards():
    with pytest.raises(ValueError):
        await _answer(_failing(ValueError("a bug")), extensions={"websocket.http.response": {}})
    with pytest.raises(OperationalError):
        await _answer(_failing(OperationalError("gone"), accept_first=True), extensions={"websocket.http.response": {}})
