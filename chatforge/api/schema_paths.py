"""Routes outside DRF, added to the OpenAPI description by a post-processing
hook so /api/schema/ describes the whole HTTP surface: the SSE event stream
and the OpenAI-compatible API (async Django views, which drf-spectacular
does not inspect)."""

from __future__ import annotations

from typing import Any

from .schema import IDEMPOTENCY_KEY_DESCRIPTION

_BEARER = [{"bearerAuth": []}]
IDEMPOTENCY_KEY_PARAMETER = {"name": "Idempotency-Key", "in": "header", "required": False,
                             "schema": {"type": "string", "maxLength": 255},
                             "description": IDEMPOTENCY_KEY_DESCRIPTION}
_OPENAI_ERROR_SCHEMA = {
    "type": "object",
    "properties": {"error": {"type": "object", "properties": {
        "message": {"type": "string"}, "type": {"type": "string"},
        "param": {"type": "string", "nullable": True}, "code": {"type": "string", "nullable": True}}}},
}
_OPENAI_ERROR = {"$ref": "#/components/schemas/OpenAIErrorResponse"}
_CHATFORGE_ERROR = {"$ref": "#/components/schemas/ErrorResponse"}

SSE_EXAMPLE = (
    'id: 1\nevent: run.started\ndata: {"seq": 1, "type": "run.started", "run_id": "…", "conversation_id": "…", '
    '"ts": "2026-01-01T00:00:00.000Z", "data": {"conversation_id": "…", "message_id": "…"}}\n\n'
    'id: 2\nevent: content.delta\ndata: {"seq": 2, "type": "content.delta", …, "data": {"text": "Let me"}}\n\n'
)


def _paths() -> dict[str, Any]:
    json_or_stream = {
        "application/json": {"schema": {"type": "object"}, "examples": {"completion": {"value": {
            "id": "chatcmpl-…", "object": "chat.completion", "created": 1767225600, "model": "demo",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "6*7 = 42."},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28},
            "tool_events": [{"type": "tool_call", "value": {"id": "call_1", "name": "calculator",
                                                            "arguments": "{\"expression\": \"6*7\"}"}},
                            {"type": "tool_output", "value": {"tool_call_id": "call_1", "name": "calculator",
                                                              "output": "{\"expression\":\"6*7\",\"result\":42}"}},
                            {"type": "text", "value": "6*7 = 42."}],
            "conversation_id": "…", "run_id": "…"}}}},
        # No schema: an event stream is not one JSON value (a "string" schema
        # made every streamed answer a schema violation); the example shows it.
        "text/event-stream": {"example": (
            'data: {"id":"chatcmpl-…","object":"chat.completion.chunk","conversation_id":"…","run_id":"…",'
            '"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
            "data: [DONE]\n\n")},
    }
    return {
        "/api/runs/{id}/events/": {"get": {
            "operationId": "runs_events_stream",
            "summary": "The run's events as Server-Sent Events",
            "description": "`id:` is the event's seq; resumes after `Last-Event-ID` or `?after=N`; keep-alive "
                           "comments every 15 s; closes after the terminal event. See docs/events.md.",
            "tags": ["runs"],
            "parameters": [
                {"name": "id", "in": "path", "required": True, "schema": {"type": "string", "format": "uuid"}},
                {"name": "after", "in": "query", "required": False,
                 "schema": {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}},
                {"name": "Last-Event-ID", "in": "header", "required": False, "schema": {"type": "string"}},
            ],
            "security": _BEARER,
            "responses": {
                "200": {"description": "Event stream (see docs/events.md for each event's shape)",
                        "content": {"text/event-stream": {"example": SSE_EXAMPLE}}},
                "400": {"description": "Bad Last-Event-ID or after", "content": {"application/json": {"schema": _CHATFORGE_ERROR}}},
                "401": {"description": "Not authenticated", "content": {"application/json": {"schema": _CHATFORGE_ERROR}}},
                "404": {"description": "No such run of yours", "content": {"application/json": {"schema": _CHATFORGE_ERROR}}},
            },
        }},
        "/v1/chat/completions": {"post": {
            "operationId": "openai_chat_completions",
            "summary": "OpenAI-compatible chat completions; ChatForge runs the tools (docs/openai-api.md)",
            "tags": ["openai"],
            "security": _BEARER,
            "parameters": [IDEMPOTENCY_KEY_PARAMETER],
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"type": "object", "required": ["model", "messages"], "properties": {
                    "model": {"type": "string", "minLength": 1},
                    "messages": {"type": "array", "minItems": 1, "items": {
                        "type": "object", "required": ["role", "content"], "properties": {
                            "role": {"type": "string", "enum": ["system", "developer", "user", "assistant"]},
                            "content": {"type": "string", "minLength": 1}}}},
                    "tools": {"type": "array"}, "stream": {"type": "boolean"},
                    "conversation_id": {"type": "string", "format": "uuid"}}},
                "example": {"model": "demo", "messages": [{"role": "user", "content": "What is 6*7?"}],
                            "tools": ["calculator"], "stream": False}}}},
            "responses": {
                "200": {"description": "chat.completion, or a stream of chat.completion.chunk", "content": json_or_stream},
                "400": {"description": "Invalid or unsupported request", "content": {"application/json": {"schema": _OPENAI_ERROR}}},
                "401": {"description": "Bad API key", "content": {"application/json": {"schema": _OPENAI_ERROR}}},
                "404": {"description": "Unknown conversation, or a model its provider does not have",
                        "content": {"application/json": {"schema": _OPENAI_ERROR}}},
                "409": {"description": "Conversation busy", "content": {"application/json": {"schema": _OPENAI_ERROR}}},
                "422": {"description": "Idempotency-Key already used for another message",
                        "content": {"application/json": {"schema": _OPENAI_ERROR}}},
                "429": {"description": "Too many requests", "content": {"application/json": {"schema": _OPENAI_ERROR}}},
                "500": {"description": "Non-streamed: the run failed (code run_failed; the provider refused, ...)",
                        "content": {"application/json": {"schema": _OPENAI_ERROR}}},
                "504": {"description": "The run did not finish in time", "content": {"application/json": {"schema": _OPENAI_ERROR}}},
            },
        }},
        "/v1/models": {"get": {
            "operationId": "openai_models_list",
            "summary": "OpenAI-compatible model list, with tool-calling validation",
            "tags": ["openai"],
            "security": _BEARER,
            "responses": {"200": {"description": "Models", "content": {"application/json": {
                "schema": {"type": "object"},
                "example": {"object": "list", "data": [{"id": "demo", "object": "model", "created": 0,
                                                       "owned_by": "chatforge", "validated": False}]}}}},
                          "401": {"description": "Bad API key", "content": {"application/json": {"schema": _OPENAI_ERROR}}}},
        }},
        "/v1/models/{model}": {"get": {
            "operationId": "openai_models_retrieve",
            "summary": "One model, as in the list",
            "tags": ["openai"],
            "security": _BEARER,
            "parameters": [{"name": "model", "in": "path", "required": True, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "The model", "content": {"application/json": {
                "schema": {"type": "object"},
                "example": {"id": "demo", "object": "model", "created": 0, "owned_by": "chatforge",
                            "validated": False}}}},
                          "404": {"description": "Not configured here",
                                  "content": {"application/json": {"schema": _OPENAI_ERROR}}}},
        }},
    }


def add_non_drf_paths(result: dict[str, Any], generator, request, public) -> dict[str, Any]:
    """drf-spectacular post-processing hook."""
    result.setdefault("paths", {}).update(_paths())
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("OpenAIErrorResponse", _OPENAI_ERROR_SCHEMA)
    schemas.setdefault("ErrorResponse", {
        "type": "object",
        "properties": {"error": {"type": "object", "properties": {
            "code": {"type": "string"}, "message": {"type": "string"}, "details": {"type": "object"}}}},
    })
    return result
