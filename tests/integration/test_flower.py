"""The worker dashboard as deployed: Flower (`celery -A chatforge flower`,
the command compose and Kubernetes run) behind basic auth sees the fleet's
workers and the tasks of a run."""

from __future__ import annotations

import sys

import httpx
import pytest

from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient, follow_run
from tests.support.stack import free_port, start_process, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

AUTH = ("ops", "flower-test-password")


def test_flower_lists_the_workers_and_a_runs_tasks(stack, fake_llm, make_user):
    port = free_port()
    flower = start_process("flower", [sys.executable, "-m", "celery", "-A", "chatforge", "flower",
                                      f"--port={port}", "--address=127.0.0.1"],
                           {**stack.env, "FLOWER_BASIC_AUTH": ":".join(AUTH)}, stack.log_dir)
    stack.processes.append(flower)
    base = f"http://127.0.0.1:{port}"

    def workers() -> dict:
        try:
            answer = httpx.get(f"{base}/api/workers", params={"refresh": "1"}, auth=AUTH, timeout=10)
        except httpx.HTTPError:
            return {}
        return answer.json() if answer.status_code == 200 else {}

    wait_for(lambda: {name.split("@")[0] for name in workers()} >= {"llm", "tools"}, timeout=60,
             what="Flower to see both workers", process=flower)
    assert httpx.get(f"{base}/api/workers", timeout=10).status_code == 401  # basic auth holds

    fake_llm.add_script("flower-run", [Reply(text="Echo.", tool_calls=[("echo", {"text": "a"})]), Reply(text="ok")])
    _, token = make_user()
    api = ApiClient(stack.http_url, token)
    run_id = api.post_message(api.new_conversation(), "go", model="flower-run")["run_id"]
    assert follow_run(stack.ws_url, run_id, token)[-1]["type"] == "run.completed"

    def run_tasks() -> set[str]:
        tasks = httpx.get(f"{base}/api/tasks", auth=AUTH, timeout=10).json()
        return {t["name"] for t in tasks.values() if run_id in str(t.get("args"))}

    wait_for(lambda: run_tasks() >= {"chatforge.llm_turn", "chatforge.tool_call"}, timeout=30,
             what="Flower to show the run's tasks (from the workers' events)", process=flower)
    flower.stop()
