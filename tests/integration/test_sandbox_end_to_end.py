"""The python tool on real processes: a sandbox worker (prefork, on the
``sandbox`` queue) runs the model's code in bubblewrap with the
conversation's files, returns the files it wrote, stops code at its
timeout, and leaves no sandbox behind when it is SIGKILLed or the run is
cancelled (docs/sandbox.md).

The stack runs on a Redis of its own and its sandboxes as a uid of the
test's own, so that "no sandbox left" is a count of that uid's processes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chatforge.conversations.models import Run, ToolInvocation
from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient, follow_run
from tests.support.private_services import private_redis
from tests.support.sandbox import SANDBOX_PYTHON, processes_of, sandbox_config, fresh_uid
from tests.support.side_by_side import stop_together
from tests.support.stack import DistributedStack, FAST_RECOVERY_ENV, distributed_stack, start_worker, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CHART_CODE = """
import pandas as pd
import matplotlib.pyplot as plt
df = pd.read_csv("/mnt/data/sales.csv")
df.plot(x="month", y="amount")
plt.savefig("chart.png")
print("total", df.amount.sum())
"""


@pytest.fixture(scope="module")
def sandbox_uid() -> int:
    return fresh_uid()


@pytest.fixture(scope="module")
def sandbox_stack(django_db_setup, django_db_blocker, fake_llm, sandbox_uid) -> Iterator[DistributedStack]:
    from tests.conftest import _test_database_url

    sandbox_config(sandbox_uid)  # fails with the reason when this host cannot run sandboxes
    with django_db_blocker.unblock():
        database_url = _test_database_url()
    with private_redis() as redis_server, distributed_stack(
        database_url=database_url, redis_url=redis_server.url(0), llm_concurrency=10, tool_concurrency=2,
        with_beat=True,
        extra_env={
            "OPENAI_BASE_URL": fake_llm.base_url,
            "OPENAI_API_KEY": "test-key",
            "CHATFORGE_TOOL_MODULES": "tests.support.tools,tests.support.sandbox_tools",
            "CHATFORGE_SANDBOX_PYTHON": SANDBOX_PYTHON,
            "CHATFORGE_SANDBOX_UID": str(sandbox_uid),
            **FAST_RECOVERY_ENV,
        },
    ) as stack:
        stack.processes.append(start_sandbox_worker(stack, "sandbox"))
        yield stack
        stop_together(reversed(stack.processes))


def start_sandbox_worker(stack: DistributedStack, name: str):
    return start_worker(name, queues="sandbox", pool="prefork", concurrency=2, env=stack.env, log_dir=stack.log_dir)


def offered_tools(api: ApiClient) -> set[str]:
    response = api.request("GET", "/api/tools/")
    assert response.status_code == 200, response.text
    body = response.json()
    items = body["tools"] if isinstance(body, dict) and "tools" in body else body
    return {item["name"] for item in items}


@pytest.fixture
def api(sandbox_stack, make_user) -> tuple[ApiClient, str]:
    _, token = make_user()
    client = ApiClient(sandbox_stack.http_url, token)
    wait_for(lambda: "python" in offered_tools(client), timeout=30, what="the python tool to be offered")
    return client, token


def upload(api: ApiClient, name: str, data: bytes, conversation_id: str) -> dict:
    response = api.request("POST", "/api/files/", files={"file": (name, data, "text/csv")},
                           data={"conversation_id": conversation_id})
    assert response.status_code == 201, response.text
    return response.json()


def test_the_model_analyses_an_attached_file_and_gets_a_chart_back(sandbox_stack, fake_llm, api, sandbox_uid):
    client, token = api
    model = "sandbox-chart"
    fake_llm.add_script(model, [Reply(text="Let me compute.", tool_calls=[("python", {"code": CHART_CODE})]),
                                Reply(text="The total is 60.")])
    conversation = client.new_conversation()
    sales = upload(client, "sales.csv", b"month,amount\nJan,10\nFeb,30\nMar,20\n", conversation)
    accepted = client.post_message(conversation, "Chart my sales", model=model, attachments=[sales["id"]])
    events = follow_run(sandbox_stack.ws_url, accepted["run_id"], token, timeout=90)

    assert events[-1]["type"] == "run.completed", sandbox_stack.logs()
    output = next(event["data"] for event in events if event["type"] == "tool_output")
    assert output["status"] == "success", output
    assert output["output"].startswith("total 60")
    (chart,) = output["files"]
    assert (chart["name"], chart["kind"], chart["content_type"]) == ("chart.png", "image", "image/png")
    download = client.request("GET", f"/api/files/{chart['id']}/content/")
    assert download.status_code == 200 and download.content.startswith(b"\x89PNG\r\n\x1a\n")
    # The model read what the code printed and which file it saved.
    tool_message = fake_llm.requests_for(model)[-1]["messages"][-1]
    assert tool_message["role"] == "tool" and "total 60" in tool_message["content"]
    assert chart["id"] in tool_message["content"]
    invocation = ToolInvocation.objects.get(run_id=accepted["run_id"])
    assert invocation.worker.startswith("sandbox@")
    assert processes_of(sandbox_config(sandbox_uid)) == []


def test_code_past_its_timeout_or_a_bomb_gets_an_error_and_the_worker_serves_on(sandbox_stack, fake_llm, api,
                                                                               sandbox_uid):
    client, token = api
    model = "sandbox-limits"
    fake_llm.add_script(model, [
        Reply(tool_calls=[("quick_python", {"code": "import time\nprint('waiting', flush=True)\ntime.sleep(600)"}),
                          ("python", {"code": "import os\nwhile True:\n    os.fork()"})]),
        Reply(tool_calls=[("python", {"code": "print(6 * 7)"})]),
        Reply(text="Done."),
    ])
    accepted = client.post_message(client.new_conversation(), "try", model=model)
    events = follow_run(sandbox_stack.ws_url, accepted["run_id"], token, timeout=120)

    assert events[-1]["type"] == "run.completed", sandbox_stack.logs()
    outputs = {event["data"]["tool_call_id"]: event["data"] for event in events if event["type"] == "tool_output"}
    calls = {event["data"]["id"]: event["data"]["name"] for event in events if event["type"] == "tool_call"}
    by_tool = {}
    for call_id, output in outputs.items():
        by_tool.setdefault(calls[call_id], []).append(output)
    (timed_out,) = by_tool["quick_python"]
    assert timed_out["status"] == "error" and "ran longer than" in timed_out["output"]
    assert "waiting" in timed_out["output"]
    bomb, answer = by_tool["python"]
    assert bomb["status"] == "error"  # its processes ran out: OSError, then the code failed
    assert answer["status"] == "success" and answer["output"] == "42"
    assert processes_of(sandbox_config(sandbox_uid)) == []


def test_a_sigkilled_sandbox_worker_leaves_no_sandbox_and_a_cancel_stops_the_next(sandbox_stack, fake_llm, api,
                                                                                 sandbox_uid):
    client, token = api
    config = sandbox_config(sandbox_uid)
    model = "sandbox-sigkill"
    fake_llm.add_script(model, [Reply(tool_calls=[("python", {"code": "import time\ntime.sleep(600)"})]),
                                Reply(text="never")])
    accepted = client.post_message(client.new_conversation(), "sleep", model=model)
    run_id = accepted["run_id"]
    wait_for(lambda: processes_of(config), timeout=60, what="the sandbox to start")

    worker = next(proc for proc in sandbox_stack.processes if proc.name.startswith("sandbox"))
    worker.kill()  # SIGKILL, the whole worker: main process and pool
    sandbox_stack.processes.remove(worker)
    wait_for(lambda: not processes_of(config), timeout=15, what="the sandbox to die with its worker")

    # The call's lease lapses; the sweeper sends it again, to a new worker.
    replacement = start_sandbox_worker(sandbox_stack, "sandbox-2")
    sandbox_stack.processes.append(replacement)
    wait_for(lambda: processes_of(config), timeout=60, what="the call to run again on the new worker")
    assert ToolInvocation.objects.get(run_id=run_id).deliveries == 2

    response = client.request("POST", f"/api/runs/{run_id}/cancel/")
    assert response.status_code == 202, response.text
    wait_for(lambda: not processes_of(config), timeout=15, what="the cancel to stop the sandbox")
    events = follow_run(sandbox_stack.ws_url, run_id, token, timeout=60)
    assert events[-1]["type"] == "run.cancelled"
    assert Run.objects.get(pk=run_id).status == "cancelled"
    assert "python" in offered_tools(client)  # the new worker reports in
