"""/v1 cannot ask anyone to approve a call: with CHATFORGE_V1_APPROVAL=deny
(the default) such tools stay offered and the run is marked to deny their
calls; with =reject a request naming one is a 400 in OpenAI's error shape
that names it."""

from __future__ import annotations

import pytest
from django.test import Client

from chatforge.catalog.models import Assistant

pytestmark = pytest.mark.django_db

BODY = {"model": "demo", "messages": [{"role": "user", "content": "hi"}], "assistant": "careful"}


@pytest.fixture
def client(make_user, idle_broker, settings):
    settings.CHATFORGE_MESSAGE_RATE = ""
    Assistant.objects.create(name="careful", tools=["echo", "calculator"], approval_required_tools=["echo"])
    _, token = make_user()
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def post(client: Client, **fields):
    return client.post("/v1/chat/completions", {**BODY, **fields}, content_type="application/json")


def test_by_default_such_calls_are_denied_in_the_run(client):
    from chatforge.conversations.models import Run

    answer = post(client, tools=["echo", "calculator"], stream=True)
    assert answer.status_code == 200
    run = Run.objects.get()
    assert (run.options["approval_tools"], run.options["approval"]) == (["echo"], "deny")


def test_reject_refuses_a_request_naming_such_tools(client, settings):
    settings.CHATFORGE_V1_APPROVAL = "reject"
    answer = post(client, tools=["echo", "calculator"])
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["code"], error["param"]) == ("approval_required", "tools")
    assert "need a person's approval for each call" in error["message"] and "echo" in error["message"]
