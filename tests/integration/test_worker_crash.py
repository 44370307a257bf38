"""A tools worker (prefork, or the I/O pool's threads) killed with SIGKILL
in the middle of a tool call loses nothing: its liveness lapses, a live
process of the stack declares it lost and re-enqueues the step (or, as the
backstop, its lease expires and the sweeper does), a new worker takes it
over, and the run completes once. tests/integration/test_worker_liveness.py
does the same with the shipped defaults and reports the time."""

from __future__ import annotations

import pytest
from django.conf import settings

from chatforge.conversations.models import Message, Run, ToolInvocation
from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient, follow_run
from tests.support.stack import private_stack, start_worker, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CRASH_REDIS_URL = settings.REDIS_URL.rsplit("/", 1)[0] + "/11"


@pytest.fixture
def crash_stack(django_db_blocker, fake_llm):
    from tests.conftest import _test_database_url

    with django_db_blocker.unblock():
        database_url = _test_database_url()
    with private_stack(database_url=database_url, redis_url=CRASH_REDIS_URL, llm_base_url=fake_llm.base_url) as stack:
        yield stack


@pytest.mark.parametrize(("tool", "worker", "queue", "pool"), [
    ("slow_sleep", "tools", "tools", "prefork"),
    ("wait_io", "tools-io", "tools_io", "threads"),  # the I/O pool's worker (decision 0025)
])
def test_sigkill_mid_tool_call_is_recovered(crash_stack, fake_llm, make_user, tool, worker, queue, pool):
    model = f"crash-slow-{tool}"
    fake_llm.add_script(model, [Reply(text="Sleeping.", tool_calls=[(tool, {"ms": 3000})]), Reply(text="Woke up.")])
    _, token = make_user()
    api = ApiClient(crash_stack.http_url, token)
    accepted = api.post_message(api.new_conversation(), "nap", model=model)
    run_id = accepted["run_id"]
    wait_for(lambda: ToolInvocation.objects.filter(run_id=run_id, status="running").exists(),
             timeout=30, what="the tool call to start")
    assert ToolInvocation.objects.get(run_id=run_id).worker.startswith(f"{worker}@")

    crash_stack.process(worker).kill()
    replacement = start_worker(f"{worker}-2", queues=queue, pool=pool, concurrency=2,
                               env=crash_stack.env, log_dir=crash_stack.log_dir)
    crash_stack.processes.append(replacement)
    events = follow_run(crash_stack.ws_url, run_id, token, timeout=60)

    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["type"] == "run.completed", crash_stack.logs()
    assert [e["type"] for e in events].count("tool_output") == 1
    invocation = ToolInvocation.objects.get(run_id=run_id)
    assert invocation.status == "success" and invocation.deliveries == 2
    assert invocation.worker.startswith(f"{worker}-2@")
    assert Run.objects.get(pk=run_id).status == "completed"
    assert Message.objects.get(run_id=run_id, role="assistant").content == "Woke up."
