"""Traces across real processes: with CHATFORGE_OTLP_ENDPOINT set, one run
is one trace — the web request that posted it, each Celery task on both
workers (the W3C context travels in the task headers), each model call and
each tool call — exported over OTLP/HTTP to a collector on loopback."""

from __future__ import annotations

import pytest
from django.conf import settings

from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient, follow_run
from tests.support.otlp_collector import OtlpCollector
from tests.support.stack import private_stack, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TRACING_REDIS_URL = settings.REDIS_URL.rsplit("/", 1)[0] + "/7"


@pytest.fixture
def traced_stack(django_db_blocker, fake_llm):
    from tests.conftest import _test_database_url

    collector = OtlpCollector().start()
    with django_db_blocker.unblock():
        database_url = _test_database_url()
    try:
        with private_stack(database_url=database_url, redis_url=TRACING_REDIS_URL, llm_base_url=fake_llm.base_url,
                           extra_env={"CHATFORGE_OTLP_ENDPOINT": collector.url,
                                      "OTEL_BSP_SCHEDULE_DELAY": "200",
                                      # Default leases, not the fast-recovery ones: on a loaded
                                      # machine a step queued for 2 s was re-sent by the sweeper,
                                      # whose message starts a trace of its own.
                                      "CHATFORGE_HEARTBEAT_S": "10", "CHATFORGE_RUN_STALL_S": "60"}) as stack:
            yield stack, collector
    finally:
        collector.stop()


def test_a_run_is_one_trace_across_the_web_process_and_both_workers(traced_stack, fake_llm, make_user):
    stack, collector = traced_stack
    fake_llm.add_script("traced", [Reply(text="Echo.", tool_calls=[("echo", {"text": "a"})]), Reply(text="Done.")])
    _, token = make_user()
    api = ApiClient(stack.http_url, token)
    run_id = api.post_message(api.new_conversation(), "go", model="traced")["run_id"]
    assert follow_run(stack.ws_url, run_id, token)[-1]["type"] == "run.completed", stack.logs()

    def run_spans():
        return [s for s in collector.received() if s.attributes.get("chatforge.run_id") == run_id]

    # Each process exports its spans in batches, on its own schedule: wait
    # until every span this test looks at has arrived (a task's span ends
    # after the spans inside it, so it may come in a later batch).
    wait_for(lambda: [s.name for s in run_spans()].count("llm.call") >= 2
             and "tool.call" in {s.name for s in run_spans()}, timeout=30,
             what="the run's two model call spans and its tool call span")
    [trace_id] = {s.trace_id for s in run_spans()}  # every step of the run, one trace

    def in_trace():
        return [s for s in collector.received() if s.trace_id == trace_id]

    expected = {"run/chatforge.llm_turn", "run/chatforge.tool_call", "llm.call", "tool.call"}
    wait_for(lambda: {s.service for s in in_trace()} >= {"chatforge-web", "chatforge-worker"}
             and {s.name for s in in_trace()} >= expected, timeout=30,
             what="the web request's span and every step's spans in the trace")
    spans = in_trace()
    assert expected <= {s.name for s in spans}
    assert sum(1 for s in spans if s.name == "llm.call") == 2
    tool = next(s for s in spans if s.name == "tool.call")
    assert tool.attributes["chatforge.tool"] == "echo" and tool.service == "chatforge-worker"
    web = [(s.name, s.trace_id == trace_id) for s in collector.received() if s.service == "chatforge-web"]
    assert any(s.service == "chatforge-web" and s.name.startswith("POST") for s in spans), web
