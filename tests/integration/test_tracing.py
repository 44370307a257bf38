"""Traces across real processes: with CHATFORGE_OTLP_ENDPOINT set, one run
is one trace — the web request that posted it, each Celery task on both
workers (the W3C context travels in the task headers), each model call and
each tool call — exported over OTLP/HTTP to a collector on loopback. A
step sent from outside its run's trace (another run's step letting it go,
the sweeper) is still sent under its own run's trace."""

from __future__ import annotations

import pytest
from django.conf import settings

from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient, follow_run
from tests.support.otlp_collector import OtlpCollector
from tests.support.side_by_side import stop_together
from tests.support.stack import private_stack, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TRACING_REDIS_URL = settings.REDIS_URL.rsplit("/", 1)[0] + "/7"


@pytest.fixture(scope="module")
def traced_stack(django_db_blocker, fake_llm):
    """One stack and collector for the module: each test follows runs of its
    own user to their end and reads only the spans of its own runs' traces."""
    from tests.conftest import _test_database_url

    collector = OtlpCollector().start()
    with django_db_blocker.unblock():
        database_url = _test_database_url()
    try:
        with private_stack(database_url=database_url, redis_url=TRACING_REDIS_URL, llm_base_url=fake_llm.base_url,
                           extra_env={"CHATFORGE_OTLP_ENDPOINT": collector.url,
                                      "OTEL_BSP_SCHEDULE_DELAY": "200",
                                      # One running step per user: a second run's first turn
                                      # waits in fair scheduling's line and is sent by the
                                      # first run's step as it ends.
                                      "CHATFORGE_USER_MAX_RUNNING_STEPS": "1"},
                           # Default leases: on a loaded machine a step queued for 2 s was
                           # re-sent by the sweeper, whose message starts a trace of its own.
                           fast_recovery=False) as stack:
            yield stack, collector
            stop_together(reversed(stack.processes))
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


def test_steps_sent_by_another_run_stay_in_their_own_runs_trace(traced_stack, fake_llm, make_user):
    """Run ``b``'s first turn waits in line behind ``a``'s (one running step
    per user) and is sent by ``a``'s turn as it ends; run ``c`` was posted
    behind ``a`` in the same conversation (on_active=enqueue) and is sent by
    ``a``'s finalize. Each is still one trace of its own, rooted at the
    request that posted it."""
    stack, collector = traced_stack
    fake_llm.add_script("slow", [Reply(text="A.", delay_s=1.5)])
    fake_llm.add_script("parked", [Reply(text="B.")])
    fake_llm.add_script("queued", [Reply(text="C.")])
    _, token = make_user()
    api = ApiClient(stack.http_url, token)
    first = api.new_conversation()
    a = api.post_message(first, "a", model="slow")["run_id"]
    b = api.post_message(api.new_conversation(), "b", model="parked")["run_id"]
    c = api.post_message(first, "c", model="queued", on_active="enqueue")["run_id"]
    for run_id in (a, b, c):
        assert follow_run(stack.ws_url, run_id, token)[-1]["type"] == "run.completed", stack.logs()

    def trace_of(run_id: str) -> set[str]:
        return {s.trace_id for s in collector.received()
                if s.name == "llm.call" and s.attributes.get("chatforge.run_id") == run_id}

    wait_for(lambda: all(trace_of(run_id) for run_id in (a, b, c)), timeout=30, what="each run's model call span")
    traces = {run_id: trace_of(run_id) for run_id in (a, b, c)}
    assert all(len(ids) == 1 for ids in traces.values()), traces
    assert len(set.union(*traces.values())) == 3, traces  # three runs, three traces

    def has_its_request(trace_id: str) -> bool:
        return any(s.trace_id == trace_id and s.service == "chatforge-web" and s.name.startswith("POST")
                   for s in collector.received())

    wait_for(lambda: all(has_its_request(next(iter(ids))) for ids in traces.values()), timeout=30,
             what="the request that posted each run, in that run's trace")
