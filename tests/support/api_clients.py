"""In-process REST API clients signed in with a user's API token."""

from __future__ import annotations

from rest_framework.test import APIClient


def api_client(user, token: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    api.user = user
    return api


def new_conversation(client: APIClient) -> str:
    return client.post("/api/conversations/", {}, format="json").json()["id"]
