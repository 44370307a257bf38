"""Metrics from real processes: each worker serves its own on its port —
the prefork tools worker the sum of its children's — and the web process
serves /metrics to the token."""

from __future__ import annotations

import httpx
import pytest
from django.conf import settings
from prometheus_client.parser import text_string_to_metric_families

from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient, follow_run
from tests.support.side_by_side import stop_together
from tests.support.stack import (free_port, launch_worker, private_stack, start_server, wait_for,
                                 wait_for_worker)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

METRICS_REDIS_URL = settings.REDIS_URL.rsplit("/", 1)[0] + "/8"
TOKEN = "scrape-token-for-tests"


def samples(url: str, **headers: str) -> dict[tuple[str, frozenset], float]:
    text = httpx.get(url, headers=headers, timeout=10).raise_for_status().text
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def sample(found: dict, name: str, **labels: str) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture(scope="module")
def metered_stack(django_db_blocker, fake_llm):
    """One stack for the module, its three workers each serving metrics on a
    port of its own. The tests cannot see each other's counts: the first
    counts its own run (on a model of its own name) and its own request, the
    second starts a web server of its own and counts the difference there."""
    from tests.conftest import _test_database_url

    with django_db_blocker.unblock():
        database_url = _test_database_url()
    with private_stack(database_url=database_url, redis_url=METRICS_REDIS_URL, llm_base_url=fake_llm.base_url,
                       extra_env={"CHATFORGE_METRICS_TOKEN": TOKEN}, fast_recovery=False) as stack:
        ports = {"llm": free_port(), "tools": free_port(), "tools-io": free_port()}
        # The stack's own workers make way for metered ones: all stopped, then all started, side by side.
        stop_together([stack.process(name) for name in ports])
        metered = []
        for name, queues, pool in (("llm", "llm,default", "gevent"), ("tools", "tools", "prefork"),
                                   ("tools-io", "tools_io", "threads")):
            env = {**stack.env, "CHATFORGE_WORKER_METRICS_PORT": str(ports[name]),
                   "CHATFORGE_WORKER_METRICS_ADDR": "127.0.0.1"}
            metered.append(launch_worker(f"{name}-metered", queues=queues, pool=pool, concurrency=2,
                                         env=env, log_dir=stack.log_dir))
        stack.processes.extend(metered)
        for worker in metered:
            wait_for_worker(worker)
        for port in ports.values():
            wait_for(lambda port=port: _up(port), timeout=30, what=f"the worker metrics on port {port}")
        yield stack, ports
        stop_together(reversed(stack.processes))


def _up(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_each_worker_and_the_web_process_serve_their_metrics(metered_stack, fake_llm, make_user):
    stack, ports = metered_stack
    fake_llm.add_script("metered-e2e", [Reply(text="Echo.", tool_calls=[("echo", {"text": "a"}),
                                                                        ("echo", {"text": "b"}),
                                                                        ("wait_io", {"ms": 0})]),
                                        Reply(text="Done.")])
    _, token = make_user()
    api = ApiClient(stack.http_url, token)
    accepted = api.post_message(api.new_conversation(), "go", model="metered-e2e")
    events = follow_run(stack.ws_url, accepted["run_id"], token)
    assert events[-1]["type"] == "run.completed", stack.logs()

    tools = samples(f"http://127.0.0.1:{ports['tools']}/metrics")
    # Two calls, run by the prefork worker's children, summed on its port.
    assert sample(tools, "chatforge_tool_calls_total", tool="echo", status="success") == 2
    assert sample(tools, "chatforge_queue_wait_seconds_count", queue="tools") == 2
    assert sample(tools, "chatforge_step_overhead_seconds_count", step="tool_call") == 2

    # The I/O pool's call, on the threads worker's own port (decision 0025).
    tools_io = samples(f"http://127.0.0.1:{ports['tools-io']}/metrics")
    assert sample(tools_io, "chatforge_tool_calls_total", tool="wait_io", status="success") == 1
    assert sample(tools_io, "chatforge_queue_wait_seconds_count", queue="tools_io") == 1
    assert sample(tools_io, "chatforge_step_overhead_seconds_count", step="tool_call") == 1
    assert sample(tools_io, "chatforge_tool_calls_total", tool="echo", status="success") == 0

    llm = samples(f"http://127.0.0.1:{ports['llm']}/metrics")
    assert sample(llm, "chatforge_provider_requests_total", provider="openai", model="metered-e2e") == 2
    assert sample(llm, "chatforge_step_overhead_seconds_count", step="llm_turn") == 2
    assert sample(llm, "chatforge_runs_finished_total", model="metered-e2e", outcome="completed") == 1
    assert sample(llm, "chatforge_queue_wait_seconds_count", queue="llm") == 2

    assert httpx.get(f"{stack.http_url}/metrics", timeout=10).status_code == 403
    web = samples(f"{stack.http_url}/metrics", Authorization=f"Bearer {TOKEN}")
    assert sample(web, "chatforge_runs_started_total", model="metered-e2e") == 1
    assert sample(web, "chatforge_http_requests_total", method="POST",
                  route="api/conversations/(?P<pk>[^/.]+)/messages/$", status="202") == 1
    routes = {dict(labels).get("route") for (name, labels) in web if name == "chatforge_http_requests_total"}
    assert not any(accepted["conversation_id"] in (route or "") for route in routes), routes


def test_a_web_server_of_several_processes_serves_their_sum(metered_stack):
    stack, _ = metered_stack
    port = free_port()
    server = start_server(port=port, env=stack.env, log_dir=stack.log_dir, name="web-2", workers=2)
    stack.processes.append(server)
    metrics_url = f"http://127.0.0.1:{port}/metrics"
    healthz = {"method": "GET", "route": "healthz", "status": "200"}
    before = sample(samples(metrics_url, Authorization=f"Bearer {TOKEN}"), "chatforge_http_requests_total", **healthz)
    assert before >= 1  # start_server's own health check
    for _ in range(12):
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200

    # Whichever process answers the scrape, it reports both processes' requests.
    for _ in range(3):
        web = samples(metrics_url, Authorization=f"Bearer {TOKEN}")
        assert sample(web, "chatforge_http_requests_total", **healthz) == before + 12
