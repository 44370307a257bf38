"""The benchmark's counting and reporting code (bench/counting.py,
bench/timed_provider.py): what it counts, never how fast anything is."""

from __future__ import annotations

import os
import time
from collections import Counter

import httpx
import psycopg
import pytest

from bench.counting import (
    ConnectionLog,
    ConnectionOwners,
    Monitor,
    Statements,
    by_kind,
    count_monitor,
    counting_postgres,
    per_process,
    per_step_counts,
    prepare_counting,
    redis_reset,
    redis_stats,
    role_url,
    statement_kind,
    statement_summary,
    summarize_queries,
)
from bench.timed_provider import TimedFakeOpenAIServer
from tests.fakes.openai_server import Reply
from tests.support.private_services import private_redis

MONITOR_LINES = """OK
1.000000 [0 127.0.0.1:1000] "BRPOP" "llm" "1"
1.001000 [0 127.0.0.1:2000] "MULTI"
1.001005 [0 127.0.0.1:2000] "HSET" "unacked" "tag" "{\\"body\\": \\"x\\"}"
1.001200 [0 127.0.0.1:2000] "EXEC"
1.002000 [0 127.0.0.1:2000] "SET" "a" "1"
1.002005 [0 127.0.0.1:2000] "INCRBY" "a" "1"
1.003000 [0 127.0.0.1:2000] "GET" "a"
1.004000 [0 127.0.0.1:3000] "EVALSHA" "abc" "1" "events:run"
1.004010 [0 lua] "xadd" "events:run" "1-0" "e" "{}"
1.004080 [0 lua] "expire" "events:run" "60"
1.004090 [0 127.0.0.1:3000] "EVALSHA" "abc" "1" "events:run"
1.004100 [0 lua] "xadd" "events:run" "2-0" "e" "{}"
1.005000 [0 127.0.0.1:1000] "LPUSH" "tools" "job"
1.005001 [0 127.0.0.1:2000] "GET" "a"
1.005002 [0 127.0.0.1:1000] "BRPOP" "llm" "1"
"""


def test_monitor_lines_give_commands_and_round_trips_per_client() -> None:
    counts = count_monitor(MONITOR_LINES.splitlines())

    assert set(counts) == {"127.0.0.1:1000", "127.0.0.1:2000", "127.0.0.1:3000"}
    worker = counts["127.0.0.1:1000"]
    assert (worker.commands, worker.round_trips) == (3, 3)  # another client's command came between
    web = counts["127.0.0.1:2000"]
    # MULTI…EXEC is one round trip however long it took; SET+INCRBY a pipeline; two GETs apart
    assert (web.commands, web.round_trips) == (7, 4)
    assert web.by_command == Counter({"MULTI": 1, "HSET": 1, "EXEC": 1, "SET": 1, "INCRBY": 1, "GET": 2})
    # Script commands are not the client's; the second EVALSHA followed the first's end at once
    events = counts["127.0.0.1:3000"]
    assert (events.commands, events.round_trips) == (2, 1)


def test_statement_kinds() -> None:
    assert statement_kind("BEGIN") == "transaction"
    assert statement_kind("RELEASE SAVEPOINT s1") == "transaction"
    assert statement_kind('SELECT "x" FROM t') == "select"
    assert statement_kind("WITH c AS (UPDATE t SET a = $1 RETURNING *) SELECT * FROM c") == "update"
    assert statement_kind("INSERT INTO t VALUES ($1)") == "insert"
    assert statement_kind("SET TIME ZONE 'UTC'") == "other"
    counted = by_kind(Counter({"BEGIN": 3, "COMMIT": 3, "SELECT 1": 2}))
    assert counted == {"total": 8, "select": 2, "transaction": 6}


def test_statement_summaries() -> None:
    assert statement_summary('SELECT "a"."id" FROM "accounts_apitoken" JOIN "b" ON x') == "SELECT accounts_apitoken"
    assert statement_summary('INSERT INTO "conversations_run" ("id") VALUES ($1)') == "INSERT conversations_run"
    claim = "WITH claimed AS (\n UPDATE conversations_llmturn SET x = $1 RETURNING *) SELECT 1"
    assert statement_summary(claim) == "UPDATE … RETURNING conversations_llmturn"
    assert statement_summary('RELEASE SAVEPOINT "s1_x2"') == "RELEASE SAVEPOINT"
    calls = Counter({'SAVEPOINT "s1_x1"': 2, 'SAVEPOINT "s1_x2"': 2, "BEGIN": 4, 'SELECT * FROM "t"': 2})
    assert summarize_queries(calls, per=2) == [("SAVEPOINT", 2.0), ("BEGIN", 2.0), ("SELECT t", 1.0)]


def test_per_step_lines_divide_each_process_by_its_own_steps() -> None:
    def procs(web: int, llm: int, tools: int, ws: int) -> dict:
        return {name: {"commands": n * 2, "round_trips": n} for name, n in
                {"web": web, "llm": llm, "tools": tools, "ws": ws, "bench": 99}.items()}

    counts = {
        "steps": {"posts": 10, "runs": 10, "turns": 20, "calls": 30},
        "sql_by_process": {
            "web": {"total": 90, "transaction": 20},
            "ws": {"total": 20},
            "llm": {"total": 200, "transaction": 40},
            "tools": {"total": 150, "transaction": 60},
        },
        "redis_by_process": {"broker": procs(30, 60, 90, 0), "events": procs(0, 80, 30, 50)},
        "pg_connections_by_process": {"web": 0, "ws": 1, "llm": 4, "tools": 1},
    }
    post, turn, call, steps, socket = per_step_counts(counts)

    assert (post["count"], post["sql"], post["sql_transaction"]) == (10, 9, 2)
    assert (post["redis_broker"], post["redis_events"], post["redis_commands"]) == (3, 0, 6)
    assert (turn["count"], turn["sql"], turn["redis_broker"], turn["redis_events"]) == (20, 10, 3, 4)
    assert (call["count"], call["sql"], call["redis_broker"], call["redis_events"]) == (30, 5, 3, 1)
    assert (steps["count"], steps["sql"], steps["sql_transaction"]) == (50, 7, 2)
    assert (steps["redis_broker"], steps["redis_events"], steps["pg_connections"]) == (3, 2.2, 0.1)
    assert (socket["count"], socket["sql"], socket["redis_events"]) == (10, 2, 5)


def test_timed_provider_notes_arrival_and_end_of_each_round() -> None:
    with TimedFakeOpenAIServer() as fake:
        fake.add_script("m", [Reply(tool_calls=[("slow_sleep", {"ms": 0})]), Reply(text="done")])
        user = {"role": "user", "content": "run-tag"}
        call = {"id": "c1", "type": "function", "function": {"name": "slow_sleep", "arguments": "{}"}}
        with httpx.Client(base_url=fake.base_url) as http:
            first = http.post("/chat/completions", json={"model": "m", "stream": True, "messages": [user]})
            assert first.status_code == 200
            second = http.post("/chat/completions", json={"model": "m", "stream": True, "messages": [
                user, {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "{}"}]})
            assert second.status_code == 200

        # The server notes an answer done after its last write, which the
        # client may have read already.
        _wait_for(lambda: all(r.done_at is not None for r in fake.requests_of("run-tag")), "both answers noted")
        rounds = fake.requests_of("run-tag")
        assert [r.round for r in rounds] == [0, 1]
        assert rounds[0].arrived_at <= rounds[0].done_at <= rounds[1].arrived_at <= rounds[1].done_at
        assert fake.requests_of("another run") == []


def _wait_for(predicate, what: str) -> None:
    deadline = time.monotonic() + 10
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_redis_round_trips_are_attributed_to_the_process_that_sent_them(tmp_path) -> None:
    with private_redis() as server:
        counter = server.client()
        redis_reset(counter)  # opens the counter's connection before the window
        monitor = Monitor(server.port, tmp_path / "monitor.txt").start()
        _wait_for(lambda: "OK" in monitor.path.read_text(), "redis-cli monitoring")
        client = server.client()
        client.ping()  # connected before the sampler looks
        owners = ConnectionOwners({}, {server.port}, singles={"pytest": os.getpid()}).start()
        redis_reset(counter)
        window_start = time.time()
        client.set("a", 1)
        with client.pipeline(transaction=True) as pipe:
            pipe.incr("a").get("a").execute()
        with client.pipeline(transaction=False) as pipe:
            pipe.incr("a").get("a").execute()
        stats = redis_stats(counter)
        lines = monitor.stop()
        owners.stop()

    window = [line for line in lines if line[:1].isdigit() and float(line.split()[0]) >= window_start]
    sent = per_process(count_monitor(window), server.port, owners)
    assert set(sent) == {"pytest"}
    expected = Counter({"SET": 1, "MULTI": 1, "INCRBY": 2, "GET": 2, "EXEC": 1, "INFO": 2})
    assert sent["pytest"].by_command == expected
    # SET, the MULTI…EXEC block, the plain pipeline: 3 round trips, as the server counted them
    assert stats["reads"] == 3
    assert sent["pytest"].round_trips == 3 + 2  # and the counter's two INFOs
    assert stats["commands"] == {"set": 1, "multi": 1, "exec": 1, "incrby": 2, "get": 2}


@pytest.fixture(scope="module")
def counting_pg():
    with counting_postgres(max_connections=20) as pg:
        pg.execute("CREATE DATABASE counted")
        prepare_counting(pg, "counted")
        yield pg


def test_statements_are_counted_per_process_role(counting_pg) -> None:
    statements = Statements(counting_pg.url("counted"))
    connections = ConnectionLog(counting_pg.dir / "server.log")
    log_start = connections.offset()
    with psycopg.connect(role_url(counting_pg, "counted", "llm")) as llm, \
            psycopg.connect(role_url(counting_pg, "counted", "tools")) as tools:
        llm.execute("CREATE TABLE steps (n int)")
        llm.commit()
        statements.reset()
        for n in range(3):
            llm.execute("INSERT INTO steps VALUES (%s)", (n,))
            llm.commit()
        tools.execute("SELECT count(*) FROM steps").fetchone()
        tools.execute("")  # a pool's connection check: a round trip, not a statement
        tools.rollback()
    counted = statements.read()
    _wait_for(lambda: sum(connections.count(log_start, connections.offset()).values()) >= 2, "the log lines")

    assert by_kind(counted["llm"]) == {"total": 9, "insert": 3, "transaction": 6}
    assert by_kind(counted["tools"]) == {"total": 3, "select": 1, "transaction": 2}
    assert by_kind(counted["web"]) == {"total": 0}
    assert connections.count(log_start, connections.offset()) == {"web": 0, "ws": 0, "llm": 1, "tools": 1}
