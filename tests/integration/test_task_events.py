"""Task events (``-E``) as Flower and ``celery events`` receive them: every
step's task is received, started and succeeded, and the gevent LLM
worker, the prefork tools worker and the threads tools_io worker send them
in batches after the task starts (chatforge/workers/buffered_task_events.py), not one message each in
the task's path."""

from __future__ import annotations

import threading
from collections import defaultdict

import pytest
from celery.events.receiver import EventReceiver

from chatforge.celery import app
from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient, follow_run
from tests.support.stack import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TASK_EVENTS = ("task-received", "task-started", "task-succeeded")


class RecordingReceiver(EventReceiver):
    """Keeps each event, and how each message carried events: a batch (a
    list, ``task.multi``) or a single event."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.events: list[dict] = []
        self.carried_by: dict[str, set[str]] = defaultdict(set)  # hostname → {"batch", "single"}
        self.handlers = {"*": self.events.append}

    def _receive(self, body, message, list=list, isinstance=isinstance):  # noqa: A002 - Celery's signature
        for event in body if isinstance(body, list) else [body]:
            if str(event.get("type", "")).startswith("task-"):
                self.carried_by[event.get("hostname", "")].add("batch" if isinstance(body, list) else "single")
        super()._receive(body, message)


def test_each_step_task_is_received_started_and_succeeded_in_batches(stack, fake_llm, make_user):
    with app.connection(stack.env["REDIS_URL"]) as connection:
        receiver = RecordingReceiver(connection, app=app)
        listening = threading.Thread(target=receiver.capture, kwargs={"wakeup": False}, daemon=True)
        listening.start()
        fake_llm.add_script("events-run", [Reply(text="", tool_calls=[("echo", {"text": "a"}), ("wait_io", {"ms": 0})]),
                                           Reply(text="ok")])
        _, token = make_user()
        api = ApiClient(stack.http_url, token)

        def steps_seen(run_id: str) -> dict[str, set[str]]:
            """Task id → the task events seen, for the run's step tasks."""
            ids = {e["uuid"]: e["name"] for e in list(receiver.events)
                   if e["type"] == "task-received" and run_id in str(e.get("args"))}
            seen: dict[str, set[str]] = {task_id: set() for task_id in ids}
            for event in list(receiver.events):
                if event.get("uuid") in seen:
                    seen[event["uuid"]].add(event["type"])
            return seen

        # The receiver subscribes asynchronously: runs until one is seen whole.
        def a_run_seen_whole() -> bool:
            run_id = api.post_message(api.new_conversation(), "go", model="events-run")["run_id"]
            assert follow_run(stack.ws_url, run_id, token)[-1]["type"] == "run.completed"
            try:
                wait_for(lambda: len(steps_seen(run_id)) == 4
                         and all(kinds == set(TASK_EVENTS) for kinds in steps_seen(run_id).values()),
                         timeout=5, what="the run's task events")
            except TimeoutError:
                return False
            return True

        wait_for(a_run_seen_whole, timeout=60, what="one run's task events, all of them")
        receiver.should_stop = True  # looked at every second, event or not
        listening.join(timeout=10)
        assert not listening.is_alive()

    hosts = {host.split("@")[0]: kinds for host, kinds in receiver.carried_by.items()}
    assert hosts["llm"] == {"batch"}  # the gevent worker: never one message per event
    assert hosts["tools"] == {"batch"}  # the prefork worker: on its event loop's timer
    assert hosts["tools-io"] == {"batch"}  # the threads worker: on a timer thread
