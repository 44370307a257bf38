"""A message for a model nobody configured, with no key for the public
endpoint it would go to, is refused at once with the setting to set — on
the REST API and on /v1 — and starts no run (it used to make its attempts
against the endpoint, then fail)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from chatforge.conversations.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_keys(settings, idle_broker):
    settings.OPENAI_BASE_URL = "https://api.openai.com/v1"
    settings.OPENAI_API_KEY = ""
    settings.CHATFORGE_MESSAGE_RATE = ""


def test_rest_api(no_keys, make_user):
    _, token = make_user()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    conversation = client.post("/api/conversations/", {}, content_type="application/json").json()["id"]
    answer = client.post(f"/api/conversations/{conversation}/messages/", {"content": "hi", "model": "gpt-unknown"},
                         content_type="application/json")
    assert answer.status_code == 400, answer.content
    assert "OPENAI_API_KEY" in answer.json()["error"]["message"]
    assert not Run.objects.exists()


def test_openai_compatible_api(no_keys, make_user):
    _, token = make_user()
    answer = Client().post("/v1/chat/completions", json.dumps({"model": "gpt-unknown", "messages": [
        {"role": "user", "content": "hi"}]}), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert answer.status_code == 400, answer.content
    error = answer.json()["error"]
    assert "OPENAI_API_KEY" in error["message"] and error["type"] == "invalid_request_error"
    assert not Run.objects.exists()
