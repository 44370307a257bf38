"""The OpenAPI schema and docs are public only where the operator says so
(CHATFORGE_PUBLIC_API_DOCS, default: debug), and the browsable API is a
debug-only aid: production answers JSON even to a browser."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.parametrize("path", ["/api/schema/", "/api/docs/", "/api/docs/?script="])
def test_the_schema_and_docs_need_an_account_unless_made_public(settings, make_user, path):
    settings.CHATFORGE_PUBLIC_API_DOCS = False
    refused = Client().get(path)
    assert refused.status_code == 401
    assert refused["Content-Type"] == "application/json"
    assert "CHATFORGE_PUBLIC_API_DOCS" in refused.json()["error"]["message"]

    _, token = make_user()
    assert Client().get(path, HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200

    settings.CHATFORGE_PUBLIC_API_DOCS = True
    assert Client().get(path).status_code == 200


def test_the_docs_page_runs_no_inline_script(settings):
    settings.CHATFORGE_PUBLIC_API_DOCS = True
    page = Client().get("/api/docs/").content.decode()
    assert "<script>" not in page  # the start-up script is a file of its own (?script)
    assert '<style nonce="' in page


def test_a_browser_gets_json_from_the_api_outside_debug(make_user):
    _, token = make_user()
    response = Client().get("/api/conversations/", HTTP_ACCEPT=BROWSER_ACCEPT, HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
