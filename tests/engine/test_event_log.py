"""Both event log backends keep the same promises: contiguous seq under
concurrent appends, dedupe keys, nothing after the terminal event, replay
from any seq, blocking reads that wake on new events."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
from django.conf import settings

from orchestration.event_log.memory import InMemoryEventLog
from orchestration.event_log.redis_stream import RedisStreamEventLog


@pytest.fixture(params=["memory", "redis"])
def log(request):
    if request.param == "memory":
        return InMemoryEventLog()
    return RedisStreamEventLog(url=settings.REDIS_URL, active_ttl_s=60, ended_ttl_s=30, max_len=10_000)


def event(n: int) -> dict:
    return {"type": "content.delta", "data": {"text": str(n)}}


def test_seq_is_contiguous_under_concurrent_appends(log):
    run_id = str(uuid.uuid4())

    def append_many(worker: int) -> None:
        for i in range(50):
            log.append(run_id, {"type": "content.delta", "data": {"text": f"{worker}:{i}"}})

    threads = [threading.Thread(target=append_many, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events = log.read(run_id, after=0, count=1000)
    assert [e["seq"] for e in events] == list(range(1, 201))
    assert len({e["data"]["text"] for e in events}) == 200


def test_dedupe_key_and_terminal(log):
    run_id = str(uuid.uuid4())
    assert log.append(run_id, event(1), dedupe_key="a") == 1
    assert log.append(run_id, event(2), dedupe_key="a") is None
    assert log.append(run_id, event(3)) == 2
    assert log.append(run_id, {"type": "run.completed", "data": {}}, terminal=True) == 3
    assert log.append(run_id, event(4)) is None
    assert log.append(run_id, {"type": "run.completed", "data": {}}, terminal=True) is None
    assert [e["seq"] for e in log.read(run_id, after=0)] == [1, 2, 3]


def test_read_after_and_blocking(log):
    run_id = str(uuid.uuid4())
    for n in range(5):
        log.append(run_id, event(n))
    assert [e["seq"] for e in log.read(run_id, after=3)] == [4, 5]
    assert log.read(run_id, after=5) == []
    threading.Timer(0.2, lambda: log.append(run_id, event(6))).start()

    woke = log.read(run_id, after=5, block_ms=5000)  # returns when the append lands
    assert [e["seq"] for e in woke] == [6]


def test_async_read(log):
    run_id = str(uuid.uuid4())
    log.append(run_id, event(1))
    events = asyncio.run(log.aread(run_id, after=0, block_ms=100))
    assert events[0]["seq"] == 1 and events[0]["data"] == {"text": "1"}


def test_redis_keys_expire_after_the_run_ends():
    import redis

    log = RedisStreamEventLog(url=settings.REDIS_URL, active_ttl_s=3600, ended_ttl_s=30, max_len=100)
    run_id = str(uuid.uuid4())
    log.append(run_id, event(1), dedupe_key="k")
    client = redis.Redis.from_url(settings.REDIS_URL)
    key = f"cf:run:{{{run_id}}}:events"
    assert 30 < client.ttl(key) <= 3600
    log.append(run_id, {"type": "run.completed", "data": {}}, terminal=True)
    for suffix in ("events", "seq", "dedupe", "ended"):
        assert 0 < client.ttl(f"cf:run:{{{run_id}}}:{suffix}") <= 30
