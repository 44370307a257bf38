"""Snapshots on the distributed stack: a run whose Redis stream is deleted —
after it finished, or while it runs — still reaches every client, over the
websocket and over SSE: a snapshot from Postgres, then the terminal event,
with seqs that only rise."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.conf import settings

from chatforge.conversations.models import Message
from orchestration.event_log.redis_stream import RedisStreamEventLog
from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient, follow_run

from .sse_client import read_sse

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TERMINAL = {"run.completed", "run.failed", "run.cancelled"}


def redis_log() -> RedisStreamEventLog:
    """The stack's event log (the one the web and worker processes use)."""
    return RedisStreamEventLog(
        url=settings.CHATFORGE_EVENT_LOG_REDIS_URL,
        active_ttl_s=settings.CHATFORGE_EVENTS_ACTIVE_TTL_S,
        ended_ttl_s=settings.CHATFORGE_EVENTS_ENDED_TTL_S,
        max_len=settings.CHATFORGE_EVENTS_MAX_PER_RUN,
    )


def assert_snapshot_then_end(events: list[dict], *, after: int, message: Message, status: str) -> None:
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs)) and seqs[0] > after, seqs
    assert events[0]["type"] == "snapshot"
    assert events[-1]["type"] == "run.completed"
    assert [e["type"] for e in events].count("run.completed") == 1
    assert events[-1]["data"]["message_id"] == str(message.id)
    assert events[0]["data"]["status"] == status


def test_finished_run_whose_stream_was_deleted(stack, fake_llm, make_user):
    fake_llm.add_script("snap-done", [Reply(text="Let me add.", tool_calls=[("calculator", {"expression": "2+3"})]),
                                      Reply(text="2+3 is 5.")])
    _, token = make_user()
    api = ApiClient(stack.http_url, token)
    run_id = api.post_message(api.new_conversation(), "2+3?", model="snap-done")["run_id"]
    original = follow_run(stack.ws_url, run_id, token)
    redis_log().delete(run_id)
    message = Message.objects.get(run_id=run_id, role="assistant")

    over_ws = follow_run(stack.ws_url, run_id, token)
    over_sse = read_sse(stack.http_url, run_id, token).events
    resumed_ws = follow_run(stack.ws_url, run_id, token, after=4)

    for events, after in [(over_ws, 0), (over_sse, 0), (resumed_ws, 4)]:
        assert [e["type"] for e in events] == ["snapshot", "run.completed"]
        assert [e["seq"] for e in events] == [after + 1, after + 2]
        assert_snapshot_then_end(events, after=after, message=message, status="completed")
        snapshot = events[0]["data"]
        assert snapshot["message"]["content"] == "2+3 is 5."
        assert snapshot["message"]["tool_rounds"] == message.tool_rounds
        assert snapshot["rounds"] == message.tool_rounds
        assert events[1]["data"] == original[-1]["data"]


def test_live_run_whose_stream_is_deleted_mid_run(stack, fake_llm, make_user):
    slow = Reply(text=" ".join(f"w{i}" for i in range(40)), chunk_delay_s=0.05)
    fake_llm.add_script("snap-live", [Reply(text="Working.", tool_calls=[("slow_sleep", {"ms": 1500})]), slow])
    _, token = make_user()
    api = ApiClient(stack.http_url, token)
    run_id = api.post_message(api.new_conversation(), "take your time", model="snap-live")["run_id"]
    # A client follows until the tool call (turn 0 is checkpointed), then the stream goes.
    seen = []
    while not any(e["type"] == "tool_call" for e in seen):
        seen += follow_run(stack.ws_url, run_id, token, after=seen[-1]["seq"] if seen else None, limit=1)
    redis_log().delete(run_id)

    with ThreadPoolExecutor(3) as pool:
        returning = pool.submit(follow_run, stack.ws_url, run_id, token, after=seen[-1]["seq"])
        new_ws = pool.submit(follow_run, stack.ws_url, run_id, token)
        new_sse = pool.submit(lambda: read_sse(stack.http_url, run_id, token).events)
        results = {"returning": returning.result(), "ws": new_ws.result(), "sse": new_sse.result()}

    message = Message.objects.get(run_id=run_id, role="assistant")
    assert message.content == slow.text
    for name, events in results.items():
        after = seen[-1]["seq"] if name == "returning" else 0
        assert_snapshot_then_end(events, after=after, message=message, status=events[0]["data"]["status"])
        assert events[0]["data"]["status"] in {"running", "completed"}, name
        assert events[0]["data"]["rounds"][0]["tool_calls"][0]["name"] == "slow_sleep"
    seqs = [e["seq"] for e in seen + results["returning"]]
    assert seqs == sorted(set(seqs))  # the client that stayed never saw a seq twice or going back
    # Whoever stayed connected got the rest of the run live, from the new log.
    tail = [e for e in results["returning"][1:] if e["type"] == "content.delta"]
    assert tail and "".join(e["data"]["text"] for e in tail).endswith("w39")
