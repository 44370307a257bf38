"""Tool calls that need approval, through real processes (two workers, beat
running the sweeper, the web server): a waiting run has no task in flight
and no busy worker; it is approved over REST and completes; another is
denied over its websocket and the model's answer follows the refusal; a
third lapses and is denied by the sweeper; a fourth survives SIGKILLed
workers and web server and a Redis FLUSHDB, and is approved afterwards."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import redis
from celery import Celery
from django.conf import settings
from django.utils import timezone
from websockets.sync.client import connect

from chatforge.catalog.models import Assistant
from chatforge.conversations.models import Message, Run, ToolInvocation
from tests.conftest import QUEUES
from tests.fakes.openai_server import Reply, tool_results
from tests.support.client import ApiClient, follow_run, run_socket_url
from tests.support.side_by_side import launch_server, stop_together, wait_for_server
from tests.support.stack import DistributedStack, launch_worker, private_stack, wait_for, wait_for_worker

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# A Redis database of its own: the test flushes it.
APPROVAL_REDIS_URL = settings.REDIS_URL.rsplit("/", 1)[0] + "/5"


@pytest.fixture(scope="module")
def approval_stack(django_db_blocker, fake_llm):
    from tests.conftest import _test_database_url

    with django_db_blocker.unblock():
        database_url = _test_database_url()
    with private_stack(database_url=database_url, redis_url=APPROVAL_REDIS_URL, llm_base_url=fake_llm.base_url,
                       extra_env={"CHATFORGE_TOOL_CATALOG_TTL_S": "0"}) as stack:
        yield stack
        stop_together(reversed(stack.processes))


def answer_from_results(body: dict[str, Any]) -> Reply:
    """The model: asks for echo first, then answers from what it got back."""
    results = tool_results(body)
    if not results:
        return Reply(text="I will echo that.", tool_calls=[("echo", {"text": "hello"})])
    output = results[-1]["content"]
    if "declined" in output:
        return Reply(text="You declined, so I did not echo it.")
    if "none was given within" in output:
        return Reply(text="Nobody approved it in time.")
    return Reply(text=f"Echoed: {output}")


@pytest.fixture
def careful(approval_stack, fake_llm, make_user):
    Assistant.objects.get_or_create(name="careful-echo", defaults={"tools": ["echo"],
                                                                   "approval_required_tools": ["echo"]})
    fake_llm.add_script("approval-model", answer_from_results)
    user, token = make_user()
    api = ApiClient(approval_stack.http_url, token)

    def start() -> str:
        accepted = api.post_message(api.new_conversation(), "echo hello", model="approval-model",
                                    assistant="careful-echo")
        run_id = accepted["run_id"]
        wait_for(lambda: ToolInvocation.objects.filter(run_id=run_id, status="awaiting_approval").exists(),
                 timeout=30, what="the call to wait for approval")
        return run_id

    return api, token, start


def call_of(run_id: str) -> ToolInvocation:
    return ToolInvocation.objects.get(run_id=run_id, name="echo")


def nothing_in_flight(stack: DistributedStack) -> None:
    """No message on any queue, and no worker running or holding a task."""
    broker = redis.Redis.from_url(APPROVAL_REDIS_URL)
    assert {queue: broker.llen(queue) for queue in QUEUES} == dict.fromkeys(QUEUES, 0)
    # Not the current app: the engine reads the broker from the current app
    # (chatforge/workers/broker_client.py), and this one lives on in the process.
    # Each question ends once every running worker has answered (at the latest at the timeout).
    workers = [proc for proc in stack.processes
               if proc.name not in ("beat", "server", "server2") and proc.popen.poll() is None]
    inspector = Celery(broker=APPROVAL_REDIS_URL, set_as_current=False).control.inspect(timeout=3,
                                                                                        limit=len(workers))
    active, reserved = inspector.active(), inspector.reserved()
    assert active and len(active) >= 2, "both workers answer"
    assert all(tasks == [] for tasks in active.values()), active
    assert all(tasks == [] for tasks in (reserved or {}).values()), reserved


def test_a_waiting_run_holds_no_worker_and_completes_once_approved_over_rest(approval_stack, careful):
    api, token, start = careful
    run_id = start()
    call = call_of(run_id)

    nothing_in_flight(approval_stack)
    status = api.request("GET", f"/api/runs/{run_id}/").json()
    assert [p["tool_call_id"] for p in status["pending_approvals"]] == [call.tool_call_id]

    decided = api.request("POST", f"/api/runs/{run_id}/tool-calls/{call.tool_call_id}/decision/",
                          json={"decision": "approve"})
    assert decided.status_code == 200, decided.text
    events = follow_run(approval_stack.ws_url, run_id, token)

    assert events[-1]["type"] == "run.completed", approval_stack.logs()
    types = [e["type"] for e in events]
    assert types.index("approval.required") < types.index("approval.decided") < types.index("tool_output")
    assert Message.objects.get(run_id=run_id, role="assistant").content == "Echoed: hello"


def test_a_denial_sent_on_the_websocket_reaches_the_model(approval_stack, careful):
    api, token, start = careful
    run_id = start()
    events: list[dict] = []
    with connect(run_socket_url(approval_stack.ws_url, run_id),
                 additional_headers={"Authorization": f"Bearer {token}"}, open_timeout=10) as ws:
        while not events or events[-1]["type"] != "approval.required":
            events.append(json.loads(ws.recv(timeout=30)))
        ws.send(json.dumps({"type": "approval", "tool_call_id": events[-1]["data"]["tool_call_id"],
                            "decision": "deny", "reason": "Not today."}))
        while events[-1]["type"] not in ("run.completed", "run.failed", "run.cancelled"):
            events.append(json.loads(ws.recv(timeout=30)))

    assert events[-1]["type"] == "run.completed", approval_stack.logs()
    decided = next(e["data"] for e in events if e["type"] == "approval.decided")
    assert (decided["decision"], decided["reason"], decided["expired"]) == ("deny", "Not today.", False)
    output = next(e["data"] for e in events if e["type"] == "tool_output")
    assert output["status"] == "error" and "Not today." in output["output"]
    assert Message.objects.get(run_id=run_id, role="assistant").content == "You declined, so I did not echo it."
    assert call_of(run_id).approval_decided_by is not None


def test_an_unanswered_request_lapses_into_a_denial(approval_stack, careful):
    api, token, start = careful
    run_id = start()
    ToolInvocation.objects.filter(run_id=run_id).update(approval_expires_at=timezone.now() - timedelta(seconds=1))

    events = follow_run(approval_stack.ws_url, run_id, token)

    assert events[-1]["type"] == "run.completed", approval_stack.logs()
    decided = next(e["data"] for e in events if e["type"] == "approval.decided")
    assert decided["expired"] is True and decided["by"] is None
    assert Message.objects.get(run_id=run_id, role="assistant").content == "Nobody approved it in time."
    late = api.request("POST", f"/api/runs/{run_id}/tool-calls/{call_of(run_id).tool_call_id}/decision/",
                       json={"decision": "approve"})
    assert late.status_code == 409


def test_a_waiting_run_survives_killed_processes_and_a_flushed_redis(approval_stack, careful):
    api, token, start = careful
    run_id = start()

    for name in ("llm", "tools", "server"):
        approval_stack.process(name).kill()
    redis.Redis.from_url(APPROVAL_REDIS_URL).flushdb()  # the broker's queues and every event log
    port = int(approval_stack.http_url.rsplit(":", 1)[1])
    # The three replacements start side by side; each is ready before the test goes on.
    server = launch_server(port=port, env=approval_stack.env, log_dir=approval_stack.log_dir, name="server2")
    workers = [launch_worker("llm2", queues="llm,default", pool="gevent", concurrency=20,
                             env=approval_stack.env, log_dir=approval_stack.log_dir),
               launch_worker("tools2", queues="tools", pool="prefork", concurrency=2,
                             env=approval_stack.env, log_dir=approval_stack.log_dir)]
    approval_stack.processes.extend([server, *workers])
    wait_for_server(server, port=port)
    for worker in workers:
        wait_for_worker(worker)

    # The request is still there: in the run's status and in the snapshot
    # that replaces the lost events.
    status = api.request("GET", f"/api/runs/{run_id}/").json()
    call_id = call_of(run_id).tool_call_id
    assert [p["tool_call_id"] for p in status["pending_approvals"]] == [call_id]
    [snapshot] = follow_run(approval_stack.ws_url, run_id, token, limit=1)
    assert snapshot["type"] == "snapshot", snapshot
    assert [p["tool_call_id"] for p in snapshot["data"]["pending_approvals"]] == [call_id]

    decided = api.request("POST", f"/api/runs/{run_id}/tool-calls/{call_id}/decision/", json={"decision": "approve"})
    assert decided.status_code == 200, decided.text
    wait_for(lambda: Run.objects.get(pk=run_id).status == "completed", timeout=60,
             what="the run to complete after the approval")
    assert Message.objects.get(run_id=run_id, role="assistant").content == "Echoed: hello"
    assert call_of(run_id).status == "success"
