"""``GET /api/runs/{id}/events/`` on the distributed stack: the run's events
as SSE, resumable with Last-Event-ID or ?after, same events as the socket."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from chatforge.realtime.sse import KEEPALIVE, format_event, with_keepalive
from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient, follow_run

from .sse_client import read_sse

TERMINAL = {"run.completed", "run.failed", "run.cancelled"}


def assert_whole_run(events: list[dict]) -> None:
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["type"] == "run.started"
    assert events[-1]["type"] == "run.completed"
    assert not any(e["type"] in TERMINAL for e in events[:-1])


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_sse_carries_the_run_and_resumes_with_last_event_id(stack, fake_llm, make_user):
    slow = Reply(text=" ".join(f"word{i}" for i in range(60)), chunk_delay_s=0.05)
    fake_llm.add_script("sse-slow", [Reply(text="Checking.", tool_calls=[("echo", {"text": "x"})]), slow])
    _, token = make_user()
    api = ApiClient(stack.http_url, token)
    accepted = api.post_message(api.new_conversation(), "talk slowly", model="sse-slow")
    assert accepted["events_sse"].endswith(f"/api/runs/{accepted['run_id']}/events/")

    first = read_sse(stack.http_url, accepted["run_id"], token, limit=10).events  # then the client drops
    assert [e["seq"] for e in first] == list(range(1, 11))
    assert first[-1]["type"] not in TERMINAL, "the run should still be going when the client drops"
    rest = read_sse(stack.http_url, accepted["run_id"], token, last_event_id=first[-1]["seq"]).events

    assert_whole_run(first + rest)  # no gap, no duplicate
    text = "".join(e["data"]["text"] for e in first + rest if e["type"] == "content.delta")
    assert text.endswith(slow.text)
    # The same events as the websocket, and ?after=N resumes too.
    assert follow_run(stack.ws_url, accepted["run_id"], token) == first + rest
    assert read_sse(stack.http_url, accepted["run_id"], token, after=5).events == (first + rest)[5:]
    # Last-Event-ID wins over ?after (it is what a reconnecting EventSource sends).
    assert read_sse(stack.http_url, accepted["run_id"], token, after=1, last_event_id=7).events == (first + rest)[7:]


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_sse_refuses_other_users_and_bad_requests(stack, fake_llm, make_user):
    fake_llm.add_script("sse-plain", [Reply(text="hello")])
    _, owner = make_user()
    _, other = make_user()
    api = ApiClient(stack.http_url, owner)
    run_id = api.post_message(api.new_conversation(), "hi", model="sse-plain")["run_id"]
    url = f"{stack.http_url}/api/runs/{run_id}/events/"

    cases = [
        ({"Authorization": f"Bearer {other}"}, 404, "not_found"),
        ({}, 401, "not_authenticated"),
        ({"Authorization": "Bearer cf_not-a-token"}, 401, "authentication_failed"),
        ({"Authorization": f"Bearer {owner}", "Last-Event-ID": "seven"}, 400, "invalid_request"),
        # Past the largest event seq: it broke the stream after a 200.
        ({"Authorization": f"Bearer {owner}", "Last-Event-ID": "18446744073709551616"}, 400, "invalid_request"),
    ]
    for after in ("18446744073709551616", "-1", "1.5"):
        response = httpx.get(url, params={"after": after}, headers={"Authorization": f"Bearer {owner}"}, timeout=30)
        assert response.status_code == 400, (after, response.text)
        assert "from 0 to 9223372036854775807" in response.json()["error"]["message"]
    for headers, status, code in cases:
        response = httpx.get(url, headers=headers, timeout=30)
        assert response.status_code == status, (headers, response.text)
        body = response.json()
        assert body["error"]["code"] == code and body["error"]["message"], body
    response = httpx.get(f"{stack.http_url}/api/runs/not-a-run/events/", headers={"Authorization": f"Bearer {owner}"})
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    response = httpx.post(url, headers={"Authorization": f"Bearer {owner}"})
    assert response.status_code == 405 and "GET" in response.json()["error"]["message"]
    assert read_sse(stack.http_url, run_id, owner).events[-1]["type"] == "run.completed"


def test_keepalive_comments_fill_silences():
    async def slow_events():
        await asyncio.sleep(0.35)
        yield {"seq": 1, "type": "content.delta", "data": {"text": "hi"}}

    async def gather() -> list[bytes]:
        return [chunk async for chunk in with_keepalive(slow_events(), interval_s=0.1)]

    chunks = asyncio.run(gather())
    assert chunks[-1] == format_event({"seq": 1, "type": "content.delta", "data": {"text": "hi"}})
    assert chunks[:-1] and set(chunks[:-1]) == {KEEPALIVE}
    assert format_event({"seq": 3, "type": "run.cancelled", "data": {"message_id": None}}) == (
        b'id: 3\nevent: run.cancelled\ndata: {"seq":3,"type":"run.cancelled","data":{"message_id":null}}\n\n'
    )


def test_keepalive_wrapper_closes_the_stream_when_the_client_leaves():
    closed = []

    async def endless():
        try:
            while True:
                await asyncio.sleep(10)
                yield {}
        finally:
            closed.append(True)

    async def leave_early() -> None:
        stream = with_keepalive(endless(), interval_s=0.05)
        assert await anext(stream) == KEEPALIVE
        await stream.aclose()

    asyncio.run(leave_early())
    assert closed == [True]


@pytest.mark.django_db
def test_sse_counts_bad_tokens_and_answers_429_past_the_limit(settings):
    import uuid

    from django.test import Client

    settings.CHATFORGE_AUTH_FAILURE_LIMIT = 1
    settings.CHATFORGE_AUTH_FAILURE_WINDOW_S = 600
    address = f"2001:db8::{uuid.uuid4().hex[:4]}"  # counts outlive a test run
    answers = [Client().get(f"/api/runs/{uuid.uuid4()}/events/", HTTP_AUTHORIZATION="Bearer cf_wrong",
                            REMOTE_ADDR=address) for _ in range(3)]
    assert [a.status_code for a in answers] == [401, 429, 429]
    assert int(answers[-1]["Retry-After"]) > 0
    assert answers[-1].json()["error"]["code"] == "throttled"
