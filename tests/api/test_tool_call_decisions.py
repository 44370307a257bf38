"""``POST /api/runs/{id}/tool-calls/{tool_call_id}/decision/``: the run's
owner approves or denies a call that awaits approval; the same decision
again is a 200 no-op, a different one a 409; other users get 404; bad bodies
a 400 that says what to send. The run's status lists pending approvals. The
waiting call is written as the engine writes it (no worker here)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from chatforge.conversations.models import Run, ToolInvocation

pytestmark = pytest.mark.django_db


@pytest.fixture
def waiting(make_user, idle_broker, settings):
    settings.CHATFORGE_MESSAGE_RATE = ""
    user, token = make_user()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    conversation = client.post("/api/conversations/", {}, content_type="application/json").json()["id"]
    accepted = client.post(f"/api/conversations/{conversation}/messages/", {"content": "go", "model": "demo"},
                           content_type="application/json").json()
    run = Run.objects.get(pk=accepted["run_id"])
    Run.objects.filter(pk=run.pk).update(status="running", pending_tool_calls=1)
    ToolInvocation.objects.create(run=run, tool_call_id="call_1", iteration=0, name="echo",
                                  arguments='{"text": "hi"}', status="awaiting_approval",
                                  approval_expires_at=timezone.now() + timedelta(minutes=10))
    return client, run


def url(run: Run, call: str = "call_1") -> str:
    return f"/api/runs/{run.pk}/tool-calls/{call}/decision/"


def test_the_run_lists_its_pending_approval(waiting):
    client, run = waiting
    body = client.get(f"/api/runs/{run.pk}/").json()
    assert [(p["tool_call_id"], p["name"], p["arguments"]) for p in body["pending_approvals"]] == [
        ("call_1", "echo", '{"text": "hi"}')]
    assert body["pending_approvals"][0]["expires_at"].endswith("Z")


def test_approve_then_the_same_again_then_a_different_decision(waiting, django_user_model):
    client, run = waiting
    first = client.post(url(run), {"decision": "approve"}, content_type="application/json")
    assert first.status_code == 200, first.content
    body = first.json()
    assert (body["status"], body["decision"], body["decided_by"]) == ("pending", "approve", run.user.get_username())
    assert client.get(f"/api/runs/{run.pk}/").json()["pending_approvals"] == []

    again = client.post(url(run), {"decision": "approve"}, content_type="application/json")
    assert again.status_code == 200 and again.json()["decided_at"] == body["decided_at"]

    other = client.post(url(run), {"decision": "deny", "reason": "changed my mind"}, content_type="application/json")
    assert other.status_code == 409
    error = other.json()["error"]
    assert error["code"] == "decision_conflict" and "already approved" in error["message"]


def test_deny_with_a_reason_records_an_error_result(waiting):
    client, run = waiting
    denied = client.post(url(run), {"decision": "deny", "reason": "Not now."}, content_type="application/json")
    assert denied.status_code == 200, denied.content
    assert (denied.json()["status"], denied.json()["reason"]) == ("error", "Not now.")
    inv = ToolInvocation.objects.get(run=run)
    assert "declined to run 'echo'" in inv.output and "Not now." in inv.output


def test_other_users_and_unknown_calls_are_not_found(waiting, make_user):
    client, run = waiting
    _, other_token = make_user()
    stranger = Client(HTTP_AUTHORIZATION=f"Bearer {other_token}")
    assert stranger.post(url(run), {"decision": "approve"}, content_type="application/json").status_code == 404
    missing = client.post(url(run, "call_nope"), {"decision": "approve"}, content_type="application/json")
    assert missing.status_code == 404 and "no tool call 'call_nope'" in missing.json()["error"]["message"]
    assert ToolInvocation.objects.get(run=run).status == "awaiting_approval"


@pytest.mark.parametrize("body", [{}, {"decision": "maybe"}, {"decision": "approve", "reason": "x" * 2001}])
def test_bad_bodies_say_what_to_send(waiting, body):
    client, run = waiting
    answer = client.post(url(run), body, content_type="application/json")
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] in ("invalid_request", "validation_error")
    assert ToolInvocation.objects.get(run=run).status == "awaiting_approval"
