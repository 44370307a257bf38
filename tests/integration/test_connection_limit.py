"""A hundred concurrent runs fit in a Postgres role limited to 30 connections.

Before connection pooling, each request thread of the web process and each
worker thread kept a connection of its own: under 100 concurrent requests the
web process alone held over a hundred, and Postgres refused the next client
("too many clients already", a 500). Here the whole stack — one web process,
an LLM worker on 16 threads, a tools worker with 4 prefork children — runs
against a private cluster as a role with CONNECTION LIMIT 30, each process
with a pool of at most 6. A hundred runs start at once over HTTP (REST posts,
and /v1 streaming completions that hold their HTTP stream open to the end),
half of them with a tool call. Every request is answered without a 5xx,
every run completes once, and ``pg_stat_activity``, sampled throughout,
shows no process above its pool size and the total within the limit.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import psycopg
import pytest

from tests.fakes.openai_server import Reply
from tests.support.db_observer import ConnectionSampler, stack_database
from tests.support.private_services import private_postgres, private_redis
from tests.support.side_by_side import stop_together
from tests.support.stack import distributed_stack

pytestmark = pytest.mark.integration

ROLE = "chatforge"
ROLE_LIMIT = 30
POOL_MAX = 6
TOOL_CHILDREN = 4
RUNS = 100
STREAMED = 30  # of the RUNS, started as /v1 streaming completions


def _start_rest_run(base: str, token: str, model: str) -> tuple[list[int], str | None]:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
        created = client.post("/api/conversations/", json={})
        if created.status_code != 201:
            return [created.status_code], None
        posted = client.post(f"/api/conversations/{created.json()['id']}/messages/",
                             json={"content": "What is 6*7?", "model": model})
        run_id = posted.json().get("run_id") if posted.status_code == 202 else None
        return [created.status_code, posted.status_code], run_id


def _streamed_run(base: str, token: str, model: str) -> tuple[list[int], str | None]:
    """A /v1 streaming completion read to its end ([DONE])."""
    body = {"model": model, "stream": True, "messages": [{"role": "user", "content": "What is 6*7?"}]}
    with httpx.Client(base_url=base, timeout=60) as client, client.stream(
        "POST", "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {token}"}
    ) as response:
        run_id = response.headers.get("X-ChatForge-Run-Id")
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    done = bool(lines) and lines[-1] == "data: [DONE]"
    errors = [json.loads(line[6:]) for line in lines[:-1] if '"error"' in line]
    return [response.status_code if done and not errors else 599], run_id


def _run_rows(pg, run_ids: list[str]) -> dict[str, tuple[str, int]]:
    with psycopg.connect(pg.url("chatforge"), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT r.id::text, r.status, (SELECT count(*) FROM conversations_message m "
            " WHERE m.run_id = r.id AND m.role = 'assistant') FROM conversations_run r WHERE r.id::text = ANY(%s)",
            [run_ids],
        ).fetchall()
    return {run_id: (status, answers) for run_id, status, answers in rows}


def test_a_hundred_concurrent_runs_fit_in_thirty_connections(fake_llm):
    fake_llm.add_script("limit-plain", [Reply(text="The answer is 42.", chunk_delay_s=0.02)])
    fake_llm.add_script("limit-tool", [Reply(text="Let me compute.", tool_calls=[("calculator", {"expression": "6*7"})]),
                                       Reply(text="It is 42.", chunk_delay_s=0.02)])
    with private_postgres() as pg, private_redis() as redis_server:
        database_url, token = stack_database(pg, role=ROLE, connection_limit=ROLE_LIMIT, redis_url=redis_server.url(0))
        extra_env = {
            "OPENAI_BASE_URL": fake_llm.base_url, "OPENAI_API_KEY": "test-key",
            "DATABASE_POOL_MAX_SIZE": str(POOL_MAX), "DATABASE_POOL_MIN_SIZE": "1",
            "CHATFORGE_MESSAGE_RATE": "", "CHATFORGE_MAX_ACTIVE_RUNS_PER_USER": str(RUNS),
        }
        with distributed_stack(database_url=database_url, redis_url=redis_server.url(0), extra_env=extra_env,
                               llm_concurrency=16, tool_concurrency=TOOL_CHILDREN) as stack:
            # The sizing rule of docs/decisions/0010: web and LLM worker at most POOL_MAX each,
            # a tools child at most 2 (its task's thread and its heartbeat thread; one task at
            # a time), the tools worker's parent process none: 6 + 6 + 4 x 2 = 20 <= 30.
            sampler = ConnectionSampler(pg, ROLE, stack.processes).start()
            try:
                with ThreadPoolExecutor(max_workers=RUNS) as pool:
                    futures = [
                        pool.submit(_streamed_run if i < STREAMED else _start_rest_run, stack.http_url, token,
                                    "limit-tool" if i % 2 else "limit-plain")
                        for i in range(RUNS)
                    ]
                    started = [f.result(timeout=100) for f in futures]
                statuses = [code for codes, _ in started for code in codes]
                run_ids = [run_id for _, run_id in started if run_id]
                assert all(code < 500 for code in statuses), (sorted(statuses), stack.logs())
                assert all(code in (200, 201, 202) for code in statuses), sorted(statuses)
                assert len(run_ids) == RUNS

                deadline = time.monotonic() + 90
                while time.monotonic() < deadline:
                    rows = _run_rows(pg, run_ids)
                    if all(status in ("completed", "failed", "cancelled") for status, _ in rows.values()):
                        break
                    time.sleep(0.5)
            finally:
                sampler.stop()
            rows = _run_rows(pg, run_ids)
            assert {status for status, _ in rows.values()} == {"completed"}, (rows, stack.logs())
            assert all(answers == 1 for _, answers in rows.values())
            logs = stack.logs()
            stop_together(reversed(stack.processes))

    print(f"\nconnections held at most: total {sampler.max_total} of {ROLE_LIMIT} "
          f"over {sampler.samples} samples; by process {dict(sorted(sampler.max_by_process.items()))}")
    assert sampler.samples > 0
    assert sampler.max_total <= ROLE_LIMIT
    assert sampler.unattributed == 0
    assert all(count <= POOL_MAX for count in sampler.max_by_process.values()), sampler.max_by_process
    children = {name: count for name, count in sampler.max_by_process.items() if name.startswith("tools:")}
    assert all(count <= 2 for count in children.values()), children
    assert "tools" not in sampler.max_by_process  # the prefork parent holds none
    assert "too many" not in logs.lower()
