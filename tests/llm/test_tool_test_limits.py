"""POST /api/tools/test starts a run like posting a message: the same rate
limit and active-run cap apply, and only staff tests change a model's shared
validation status."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from chatforge.conversations.models import Conversation
from chatforge.llm.models import ModelValidation

pytestmark = pytest.mark.django_db

# No worker listens on the idle broker: a test run stays queued, and a
# test with the shortest timeout answers 504 after a second.
QUICK_TEST = {"query": "What is 6*7?", "model": "demo", "timeout_s": 1}


@pytest.fixture
def api(make_user, idle_broker, settings):
    settings.CHATFORGE_MESSAGE_RATE = ""
    cache.clear()
    user, token = make_user()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    client.user = user
    return client


def test_tool_tests_share_the_message_rate_limit(api, settings):
    settings.CHATFORGE_MESSAGE_RATE = "2/min"
    conversation_id = api.post("/api/conversations/", {}, format="json").json()["id"]
    assert api.post(f"/api/conversations/{conversation_id}/messages/", {"content": "hi"},
                    format="json").status_code == 202
    assert api.post("/api/tools/test", QUICK_TEST, format="json").status_code == 504

    refused = api.post("/api/tools/test", QUICK_TEST, format="json")
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0 and refused.json()["error"]["code"] == "throttled"


def test_tool_tests_count_against_the_active_run_cap_and_leave_nothing_when_refused(api, settings):
    settings.CHATFORGE_MAX_ACTIVE_RUNS_PER_USER = 1
    assert api.post("/api/tools/test", QUICK_TEST, format="json").status_code == 504  # its run stays queued
    conversations = Conversation.objects.filter(user=api.user).count()

    refused = api.post("/api/tools/test", QUICK_TEST, format="json")
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "too_many_active_runs"
    assert Conversation.objects.filter(user=api.user).count() == conversations


def test_only_staff_may_record_toward_the_shared_validation_status(api):
    refused = api.post("/api/tools/test", {**QUICK_TEST, "record": True}, format="json")
    assert refused.status_code == 403
    assert "Only staff may record" in refused.json()["error"]["message"]
    assert not Conversation.objects.filter(user=api.user).exists()  # refused before any run started

    api.user.is_staff = True
    api.user.save()
    assert api.post("/api/tools/test", {**QUICK_TEST, "record": True}, format="json").status_code == 504
    assert ModelValidation.objects.count() == 0  # a test that did not end is not recorded either
