"""GET /api/models/ per caller: each model with ``available`` and, when not,
the ``unavailable_reason``; the fields the OpenAPI schema documents."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from chatforge.accounts.secrets import user_secret_set
from chatforge.llm.models import LanguageModel, Provider
from tests.support.api_clients import api_client

pytestmark = pytest.mark.django_db

MODEL_FIELDS = {"id", "provider", "kind", "capabilities", "validation", "available", "unavailable_reason"}


@pytest.fixture(autouse=True)
def anthropic_without_a_server_key(settings):
    settings.ANTHROPIC_BASE_URL = "https://api.anthropic.com"
    settings.ANTHROPIC_API_KEY = ""
    provider = Provider.objects.create(name="anthropic-main", kind="anthropic")
    LanguageModel.objects.create(name="anthropic/claude-test", provider=provider)


def _models(client: APIClient) -> dict:
    response = client.get("/api/models/")
    assert response.status_code == 200, response.content
    return response.json()


def test_each_caller_sees_what_they_can_use(make_user):
    without, with_key = make_user("without"), make_user("with-key")
    user_secret_set(user=with_key[0], name="anthropic_api_key", value="sk-ant-own")

    theirs = _models(api_client(*without))
    assert set(theirs) == {"default", "default_available", "default_unavailable_reason", "unavailable_providers",
                           "models"}
    assert all(set(m) == MODEL_FIELDS for m in theirs["models"])
    claude = next(m for m in theirs["models"] if m["id"] == "anthropic/claude-test")
    assert claude["available"] is False
    assert "'anthropic_api_key' on the Settings page" in claude["unavailable_reason"]
    assert theirs["unavailable_providers"] == ["anthropic-main"]

    mine = _models(api_client(*with_key))
    claude = next(m for m in mine["models"] if m["id"] == "anthropic/claude-test")
    assert claude["available"] is True and claude["unavailable_reason"] is None
    assert mine["unavailable_providers"] == []


def test_the_schema_documents_the_fields(make_user):
    schema = api_client(*make_user()).get("/api/schema/", {"format": "json"})
    assert schema.status_code == 200, schema.content[:500]
    components = schema.json()["components"]["schemas"]
    entry = components["ModelEntry"]
    assert set(entry["properties"]) == MODEL_FIELDS
    assert entry["properties"]["unavailable_reason"]["nullable"] is True
    assert set(components["ModelListResponse"]["properties"]) == {
        "default", "default_available", "default_unavailable_reason", "unavailable_providers", "models"}
    listing = schema.json()["paths"]["/api/models/"]["get"]["responses"]["200"]["content"]["application/json"]
    assert listing["schema"]["$ref"].endswith("/ModelListResponse")
