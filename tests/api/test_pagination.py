"""Lists take any limit and offset a client sends and answer with a page,
never a 500 (schemathesis found limit=8281292325157082268098887680)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from chatforge.api.pagination import MAX_PAGE_SIZE
from chatforge.conversations.models import Conversation

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(make_user):
    user, token = make_user()
    Conversation.objects.bulk_create(Conversation(user=user, title=f"c{i}") for i in range(MAX_PAGE_SIZE + 5))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.mark.parametrize("query, expected", [
    ("", 50),
    ("?limit=3", 3),
    (f"?limit={MAX_PAGE_SIZE + 1}", MAX_PAGE_SIZE),
    ("?limit=8281292325157082268098887680", MAX_PAGE_SIZE),
    ("?offset=-16777215&limit=8281292325157082268098887680", MAX_PAGE_SIZE),
    ("?offset=99999999999999999999999999", 0),
    ("?offset=200", 5),
    ("?limit=abc&offset=xyz", 50),
    ("?limit=-4", 50),
])
def test_any_limit_and_offset_get_a_page(api, query, expected):
    response = api.get(f"/api/conversations/{query}")
    assert response.status_code == 200, response.content
    body = response.json()
    assert len(body["results"]) == expected
    assert body["count"] == MAX_PAGE_SIZE + 5
