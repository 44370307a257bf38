"""Postgres restarted in the middle of runs.

The whole stack (web, LLM worker on gevent, tools worker, beat) runs against
a private Postgres cluster. Runs are started, some streaming a long answer,
some in a tool round; while they are in flight the cluster is stopped
(``pg_ctl -m fast``: every session is cut) and kept down for a few seconds.

During the outage every API path answers JSON 503 with ``Retry-After``
instead of 500: REST reads and writes, ``/v1`` (in OpenAI's error shape),
the SSE event stream and the websocket handshake. When the cluster is back,
each process's pool reconnects by itself (no process is restarted), every
run completes exactly once (one assistant message, one terminal event,
events numbered without gaps or repeats, each tool's side effect done once)
and a new run completes.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import psycopg
import pytest
import redis
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from orchestration.event_log.events import TERMINAL_TYPES
from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient, follow_run, run_socket_url
from tests.support.db_observer import stack_database
from tests.support.private_services import private_postgres, private_redis
from tests.support.side_by_side import stop_together
from tests.support.stack import distributed_stack, wait_for

pytestmark = pytest.mark.integration

LONG_ANSWER = " ".join(f"word{i}" for i in range(80))  # about 4 s at 0.05 s a chunk
OUTAGE_S = 6
TERMINAL = ("completed", "failed", "cancelled")


def _runs(pg, run_ids: list[str]) -> dict[str, tuple[str, int, int]]:
    """run id → (status, assistant messages, tool invocations)."""
    with psycopg.connect(pg.url("chatforge"), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT r.id::text, r.status,"
            " (SELECT count(*) FROM conversations_message m WHERE m.run_id = r.id AND m.role = 'assistant'),"
            " (SELECT count(*) FROM conversations_toolinvocation t WHERE t.run_id = r.id)"
            " FROM conversations_run r WHERE r.id::text = ANY(%s)",
            [run_ids],
        ).fetchall()
    return {run_id: (status, answers, calls) for run_id, status, answers, calls in rows}


def _running(pg, run_ids: list[str]) -> bool:
    return all(status == "running" for status, _, _ in _runs(pg, run_ids).values())


def _assert_503(response: httpx.Response, *, openai_shape: bool = False) -> None:
    assert response.status_code == 503, (response.request.url, response.status_code, response.text)
    assert response.headers.get("Retry-After"), response.headers
    error = response.json()["error"]
    assert error["code"] == "service_unavailable", error
    assert "unavailable" in error["message"]
    if openai_shape:
        assert error["type"] == "server_error"


def _probe_every_path(base: str, ws_base: str, token: str, run_id: str, conversation_id: str) -> int:
    """Each API path once while the database is down; returns how many answered."""
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        _assert_503(client.get("/api/conversations/"))
        _assert_503(client.post("/api/conversations/", json={}))
        _assert_503(client.post(f"/api/conversations/{conversation_id}/messages/",
                                json={"content": "during the outage", "model": "outage-plain"}))
        _assert_503(client.get(f"/api/runs/{run_id}/"))
        _assert_503(client.get(f"/api/runs/{run_id}/events/"))
        _assert_503(client.get("/v1/models"), openai_shape=True)
        _assert_503(client.post("/v1/chat/completions", json={
            "model": "outage-plain", "messages": [{"role": "user", "content": "hi"}], "stream": True}),
            openai_shape=True)
    with pytest.raises(InvalidStatus) as refused:
        connect(run_socket_url(ws_base, run_id), additional_headers=headers, open_timeout=30)
    assert refused.value.response.status_code == 503
    assert refused.value.response.headers.get("Retry-After")
    return 8


def test_postgres_restarted_mid_run(fake_llm):
    fake_llm.add_script("outage-plain", [Reply(text=LONG_ANSWER, chunk_delay_s=0.05)])
    fake_llm.add_script("outage-tools", [
        Reply(text="Working on it.", tool_calls=[("slow_sleep", {"ms": 2500}), ("count_effect", {}),
                                                  ("wait_io", {"ms": 2500})]),  # the I/O pool's worker too
        Reply(text=LONG_ANSWER, chunk_delay_s=0.05),
    ])
    with private_postgres() as pg, private_redis() as redis_server:
        database_url, token = stack_database(pg, role="chatforge", connection_limit=None, redis_url=redis_server.url(0))
        effects_url = redis_server.url(3)
        extra_env = {
            "OPENAI_BASE_URL": fake_llm.base_url, "OPENAI_API_KEY": "test-key",
            "CHATFORGE_TOOL_MODULES": "tests.support.tools", "CHATFORGE_TEST_EFFECTS_REDIS_URL": effects_url,
            "CHATFORGE_MESSAGE_RATE": "", "CHATFORGE_MAX_ACTIVE_RUNS_PER_USER": "20",
            "CHATFORGE_HEARTBEAT_S": "1", "CHATFORGE_RUN_STALL_S": "5",
            "CHATFORGE_SWEEP_INTERVAL_S": "2", "DATABASE_POOL_TIMEOUT_S": "3",
        }
        with distributed_stack(database_url=database_url, redis_url=redis_server.url(0), extra_env=extra_env,
                               llm_concurrency=20, tool_concurrency=4, with_beat=True) as stack:
            pids = {proc.name: proc.popen.pid for proc in stack.processes}
            api = ApiClient(stack.http_url, token)
            conversations = [api.new_conversation() for _ in range(6)]
            run_ids = [api.post_message(conversation, "go", model="outage-tools" if i % 2 else "outage-plain")["run_id"]
                       for i, conversation in enumerate(conversations)]
            wait_for(lambda: _running(pg, run_ids), timeout=30, what="every run to start")
            time.sleep(1.0)  # answers are streaming and tools are sleeping

            pg.stop("fast")
            stopped_at = time.monotonic()
            try:
                probed = _probe_every_path(stack.http_url, stack.ws_url, token, run_ids[0], conversations[0])
                time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - stopped_at)))
            finally:
                pg.start()

            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                if all(status in TERMINAL for status, _, _ in _runs(pg, run_ids).values()):
                    break
                time.sleep(0.5)
            rows = _runs(pg, run_ids)
            assert {status for status, _, _ in rows.values()} == {"completed"}, (rows, stack.logs())
            assert all(answers == 1 for _, answers, _ in rows.values()), rows
            assert [calls for _, _, calls in rows.values()].count(3) == 3, rows

            with ThreadPoolExecutor(max_workers=len(run_ids)) as pool:
                streams = list(pool.map(lambda run_id: follow_run(stack.ws_url, run_id, token, timeout=30), run_ids))
            for events in streams:
                assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
                assert [event["type"] for event in events][-1] == "run.completed"
                assert sum(event["type"] in TERMINAL_TYPES for event in events) == 1, [e["type"] for e in events]
            effects = redis.Redis.from_url(effects_url)
            counts = [int(effects.get(key)) for key in effects.keys("effect:*")]
            assert counts == [1, 1, 1], counts

            # Nothing was restarted: the same processes serve a new run.
            assert {proc.name: proc.popen.pid for proc in stack.processes} == pids
            assert all(proc.popen.poll() is None for proc in stack.processes), stack.logs()
            fresh = api.post_message(api.new_conversation(), "again", model="outage-plain")["run_id"]
            events = follow_run(stack.ws_url, fresh, token, timeout=60)
            assert events[-1]["type"] == "run.completed", stack.logs()
            stop_together(reversed(stack.processes))
    assert probed == 8
