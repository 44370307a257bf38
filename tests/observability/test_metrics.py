"""The metrics: /metrics is readable with the token or by staff only; a run
through the engine moves the engine, tool and provider metrics; requests are
counted by route pattern; every metric is documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client
from prometheus_client import REGISTRY

from chatforge.catalog.models import Assistant
from chatforge.conversations.models import Conversation
from chatforge.observability import metrics
from orchestration import tasks
from orchestration.services.approvals import decide
from orchestration.services.runs import RunOptions, run_start
from tests.conftest import QUEUES
from tests.fakes.openai_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "observability.md"


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_metrics_need_the_token_or_a_staff_session(client, settings, make_user, django_user_model):
    settings.CHATFORGE_METRICS_TOKEN = ""
    refused = client.get("/metrics")
    assert refused.status_code == 403 and "Set CHATFORGE_METRICS_TOKEN" in refused.json()["error"]["message"]

    settings.CHATFORGE_METRICS_TOKEN = "scrape-me"
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    _, api_token = make_user()
    assert Client(HTTP_AUTHORIZATION=f"Bearer {api_token}").get("/metrics").status_code == 403  # an API token is not it
    scraped = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-me")
    assert scraped.status_code == 200 and scraped["Content-Type"].startswith("text/plain")
    assert "chatforge_http_requests_total" in scraped.content.decode()

    staff = django_user_model.objects.create_user("ops", password="pw", is_staff=True)
    client.force_login(staff)
    assert client.get("/metrics").status_code == 200


def test_requests_are_counted_by_route_pattern_not_path(client):
    before = value("chatforge_http_requests_total", method="GET", route="healthz", status="200")
    client.get("/healthz")
    client.get("/healthz")
    assert value("chatforge_http_requests_total", method="GET", route="healthz", status="200") == before + 2
    client.get("/api/runs/00000000-0000-0000-0000-000000000000/")  # a path with an id: never a label
    samples = [s for m in REGISTRY.collect() if m.name == "chatforge_http_requests" for s in m.samples]
    assert not any("00000000" in s.labels.get("route", "") for s in samples)


def test_a_run_moves_the_engine_tool_and_provider_metrics(settings, fake_llm, idle_broker, make_user):
    settings.OPENAI_BASE_URL = fake_llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    fake_llm.add_script("metered", [Reply(text="Let me.", tool_calls=[("calculator", {"expression": "6*7"}),
                                                                      ("no_such_tool", {})]),
                                    Reply(text="42.")])
    user, _ = make_user()
    before = {
        "started": value("chatforge_runs_started_total", model="metered"),
        "completed": value("chatforge_runs_finished_total", model="metered", outcome="completed"),
        "calc": value("chatforge_tool_calls_total", tool="calculator", status="success"),
        "unknown": value("chatforge_tool_errors_total", tool="(unknown)", kind="unknown_tool"),
        "requests": value("chatforge_provider_requests_total", provider="openai", model="metered"),
        "overhead": value("chatforge_step_overhead_seconds_count", step="llm_turn"),
        "ttft": value("chatforge_provider_time_to_first_token_seconds_count", provider="openai", model="metered"),
    }
    run = run_start(user=user, conversation=Conversation.objects.create(user=user), content="6*7?",
                    options=RunOptions(model="metered"))
    idle_broker.delete(*QUEUES)
    tasks.llm_turn(str(run.id), 0)
    for call_id in run.tool_invocations.values_list("tool_call_id", flat=True):
        tasks.tool_call(str(run.id), call_id)
    tasks.llm_turn(str(run.id), 1)

    assert value("chatforge_runs_started_total", model="metered") == before["started"] + 1
    assert value("chatforge_runs_finished_total", model="metered", outcome="completed") == before["completed"] + 1
    assert value("chatforge_tool_calls_total", tool="calculator", status="success") == before["calc"] + 1
    assert value("chatforge_tool_errors_total", tool="(unknown)", kind="unknown_tool") == before["unknown"] + 1
    assert value("chatforge_provider_requests_total", provider="openai", model="metered") == before["requests"] + 2
    assert value("chatforge_step_overhead_seconds_count", step="llm_turn") == before["overhead"] + 2
    assert value("chatforge_provider_time_to_first_token_seconds_count", provider="openai",
                 model="metered") == before["ttft"] + 2
    assert value("chatforge_run_iterations_count") >= 1


def test_approval_decisions_are_counted(settings, fake_llm, idle_broker, make_user):
    settings.OPENAI_BASE_URL = fake_llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    Assistant.objects.create(name="asks", tools=["echo"], approval_required_tools=["echo"])
    fake_llm.add_script("asking", [Reply(tool_calls=[("echo", {"text": "x"})]), Reply(text="ok")])
    user, _ = make_user()
    run = run_start(user=user, conversation=Conversation.objects.create(user=user), content="go",
                    options=RunOptions(model="asking", assistant="asks"))
    tasks.llm_turn(str(run.id), 0)
    before = value("chatforge_tool_approvals_total", outcome="denied")
    declined = value("chatforge_tool_errors_total", tool="echo", kind="declined")
    decide(run_id=str(run.id), tool_call_id=run.tool_invocations.get().tool_call_id, user=user, decision="deny")
    assert value("chatforge_tool_approvals_total", outcome="denied") == before + 1
    assert value("chatforge_tool_errors_total", tool="echo", kind="declined") == declined + 1


def test_every_metric_is_documented_and_every_documented_metric_exists():
    defined = {m._name + ("_total" if m._type == "counter" else "") for m in vars(metrics).values()
               if hasattr(m, "_name") and hasattr(m, "_documentation")} | metrics.SCRAPE_TIME_METRICS
    documented = set(re.findall(r"^\| `(chatforge_[a-z_]+)`", DOCS.read_text(), re.M))
    assert defined == documented


def test_queue_depth_is_read_from_the_broker_at_each_scrape(client, settings, make_user, idle_broker):
    settings.CHATFORGE_METRICS_TOKEN = "scrape-me"
    idle_broker.delete(*QUEUES)

    def depth(queue: str) -> float:
        text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-me").content.decode()
        found = re.search(rf'^chatforge_queue_depth{{queue="{queue}"}} (\S+)$', text, re.M)
        return float(found.group(1)) if found else -1.0

    assert depth("llm") == 0.0 and depth("tools") == 0.0
    user, _ = make_user()
    for _ in range(3):
        run_start(user=user, conversation=Conversation.objects.create(user=user), content="hi",
                  options=RunOptions(model="demo"))
    assert depth("llm") == 3.0  # no worker listens on the test broker: the first turns wait
