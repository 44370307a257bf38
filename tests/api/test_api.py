"""The REST API's contract: shapes, status codes and JSON errors a person can act on."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from chatforge.conversations.models import Message, Run
from tests.support.api_clients import new_conversation

pytestmark = pytest.mark.django_db


def test_post_message_returns_202_with_run_and_event_urls(client):
    conversation_id = new_conversation(client)
    response = client.post(
        f"/api/conversations/{conversation_id}/messages/",
        {"content": "What is 2+2?", "tools": ["calculator"], "max_iterations": 4},
        format="json",
    )
    assert response.status_code == 202
    body = response.json()
    assert set(body) == {"conversation_id", "message_id", "run_id", "status", "events_ws", "events_sse"}
    assert body["events_ws"] == f"ws://testserver/ws/runs/{body['run_id']}/"
    assert body["events_sse"] == f"http://testserver/api/runs/{body['run_id']}/events/"
    run = Run.objects.get(pk=body["run_id"])
    assert run.options == {"tools": ["calculator"], "max_iterations": 4}
    assert run.model == "demo"
    assert Message.objects.get(pk=body["message_id"]).content == "What is 2+2?"
    listed = client.get(f"/api/conversations/{conversation_id}/").json()
    assert listed["title"] == "What is 2+2?"


@pytest.mark.parametrize(
    ("payload", "status", "code", "fragment"),
    [
        ({"content": ""}, 400, "invalid_request", "content"),
        ({}, 400, "invalid_request", "content: This field is required."),
        ({"content": "hi", "tools": ["nope", "calculator"]}, 400, "unknown_tool", "Unknown tool(s): nope. Available tools:"),
        ({"content": "hi", "max_iterations": 500}, 400, "invalid_request", "max_iterations"),
        ({"content": "hi", "reasoning_effort": "extreme"}, 400, "invalid_request", "reasoning_effort"),
        ({"content": "   "}, 400, "invalid_request", "The message is empty"),
        ({"content": "hi", "assistant": "helper"}, 400, "invalid_request", "Unknown assistant 'helper'"),
    ],
)
def test_bad_messages_get_clear_json_errors_and_start_nothing(client, payload, status, code, fragment):
    conversation_id = new_conversation(client)
    response = client.post(f"/api/conversations/{conversation_id}/messages/", payload, format="json")
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code
    assert fragment in error["message"]
    assert not Run.objects.exists()
    assert not Message.objects.exists()


def test_unknown_tool_error_lists_the_available_ones(client):
    conversation_id = new_conversation(client)
    response = client.post(f"/api/conversations/{conversation_id}/messages/", {"content": "x", "tools": ["nope"]}, format="json")
    details = response.json()["error"]["details"]
    assert details["unknown"] == ["nope"]
    assert {"calculator", "echo", "get_time"} <= set(details["available"])


def test_unauthenticated_and_bad_token_are_json(client):
    anonymous = APIClient()
    response = anonymous.get("/api/conversations/")
    assert response.status_code in (401, 403)
    assert response.json()["error"]["message"]
    anonymous.credentials(HTTP_AUTHORIZATION="Bearer cf_not-a-token")
    response = anonymous.get("/api/conversations/")
    assert response.status_code == 401
    assert "invalid or revoked" in response.json()["error"]["message"]


def test_unknown_routes_and_malformed_ids_are_json_404(client):
    assert client.get("/api/runs/not-a-uuid/").status_code == 404
    assert client.post("/api/runs/not-a-uuid/cancel/").status_code == 404
    response = client.get("/api/nothing-here/")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_cancel_sets_the_flag(client):
    conversation_id = new_conversation(client)
    run_id = client.post(f"/api/conversations/{conversation_id}/messages/", {"content": "hi"}, format="json").json()["run_id"]
    response = client.post(f"/api/runs/{run_id}/cancel/")
    assert response.status_code == 202
    assert response.json()["cancel_requested"] is True


def test_delete_conversation(client):
    conversation_id = new_conversation(client)
    assert client.delete(f"/api/conversations/{conversation_id}/").status_code == 204
    assert client.get(f"/api/conversations/{conversation_id}/").status_code == 404


def test_health_and_openapi(client):
    assert APIClient().get("/healthz").json() == {"status": "ok"}
    ready = APIClient().get("/readyz")
    assert ready.status_code == 200 and ready.json()["checks"] == {"database": True, "broker": True, "event_log": True}
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert "/api/conversations/{id}/messages/" in paths
    assert "202" in paths["/api/conversations/{id}/messages/"]["post"]["responses"]
    assert "/api/runs/{id}/cancel/" in paths


def test_readyz_names_what_is_unreachable(settings):
    settings.CHATFORGE_EVENT_LOG_REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    ready = APIClient().get("/readyz")
    assert ready.status_code == 503
    body = ready.json()
    assert body["checks"]["event_log"] is False and body["checks"]["database"] is True
    assert "event_log" in body["error"]["message"]


def test_the_openapi_description_covers_every_route_with_examples(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    assert {"/api/runs/{id}/events/", "/v1/chat/completions", "/v1/models"} <= set(schema["paths"])
    assert schema["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    operations = [(method, path) for path, ops in schema["paths"].items() for method, op in ops.items()
                  if method in ("get", "post", "put", "patch", "delete")]
    without = [(m, p) for m, p in operations if "example" not in str(schema["paths"][p][m])]
    assert without == []
