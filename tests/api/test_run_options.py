"""Who sees an assistant's system prompt in a run: staff do; the run's owner
sees the assistant's name only. The prompt is the operator's configuration
and may hold instructions users are not meant to read."""

from __future__ import annotations

import pytest
from django.test import Client

from chatforge.api.serializers import visible_run_options
from chatforge.catalog.models import Assistant

pytestmark = pytest.mark.django_db

PROMPT = "Internal: never mention the discount code."


@pytest.fixture
def run_of(make_user, idle_broker, settings):
    """A run started with the assistant by a new user (staff or not), and that user's client."""
    settings.CHATFORGE_MESSAGE_RATE = ""
    Assistant.objects.create(name="secretive", system_prompt=PROMPT, model="demo")

    def start(*, staff: bool) -> tuple[Client, str]:
        user, token = make_user()
        user.is_staff = staff
        user.save()
        client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
        conversation = client.post("/api/conversations/", {}, content_type="application/json").json()["id"]
        run = client.post(f"/api/conversations/{conversation}/messages/",
                          {"content": "hi", "assistant": "secretive"}, content_type="application/json")
        assert run.status_code == 202, run.content
        return client, run.json()["run_id"]

    return start


def test_the_owner_sees_the_assistants_name_but_not_its_prompt(run_of):
    client, run_id = run_of(staff=False)
    for answer in (client.get(f"/api/runs/{run_id}/"), client.get(f"/api/runs/{run_id}"),
                   client.post(f"/api/runs/{run_id}/cancel/")):
        assert answer.status_code in (200, 202), answer.content
        options = answer.json()["options"]
        assert options["assistant"] == "secretive"
        assert "system_prompt" not in options
        assert "discount code" not in answer.content.decode()


def test_staff_see_the_assistants_prompt(run_of):
    client, run_id = run_of(staff=True)
    options = client.get(f"/api/runs/{run_id}/").json()["options"]
    assert options["assistant"] == "secretive"
    assert options["system_prompt"] == PROMPT


def test_a_prompt_that_came_with_no_assistant_is_the_owners_and_stays():
    own = {"tools": [], "system_prompt": "Answer in French."}
    assert visible_run_options(own, viewer_is_staff=False) == own
    configured = {"assistant": "secretive", "system_prompt": PROMPT}
    assert visible_run_options(configured, viewer_is_staff=False) == {"assistant": "secretive"}
    assert visible_run_options(configured, viewer_is_staff=True) == configured
