"""OpenAPI description extras: the Bearer token scheme and shared examples."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiExample, OpenApiParameter


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "chatforge.accounts.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A ChatForge API token (cf_…), created with `manage.py create_demo_user` or in the admin.",
        }


IDEMPOTENCY_KEY_DESCRIPTION = (
    "A key of the client's choosing (a UUID per message is a good choice). A repeat of the request with "
    "the same key returns the first request's run (header Idempotent-Replayed: true) instead of starting "
    "another; the same key with a different message is refused (422)."
)
IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key", str, OpenApiParameter.HEADER, required=False, description=IDEMPOTENCY_KEY_DESCRIPTION
)
CONVERSATION_SOURCE = OpenApiParameter(
    "source", str, OpenApiParameter.QUERY, required=False, enum=["chat", "openai"],
    description="Only conversations made on the chat page or the REST API (chat), or by OpenAI clients "
                "through /v1 (openai). Absent: all.",
)
CONVERSATION_SEARCH = OpenApiParameter(
    "q", str, OpenApiParameter.QUERY, required=False,
    description="Only conversations whose title or any message contains this text (case-insensitive).",
)
CONVERSATION_ARCHIVED = OpenApiParameter(
    "archived", str, OpenApiParameter.QUERY, required=False, enum=["0", "1"],
    description="1: only archived conversations; 0 (the default): the others. A search (q) covers both "
                "(each result's archived_at says which it is).",
)
MESSAGES_TREE = OpenApiParameter(
    "tree", str, OpenApiParameter.QUERY, required=False, enum=["0", "1"],
    description="1: every message of the conversation, every version, by creation time (each names its "
                "parent_id). Absent or 0: the current branch, in order.",
)
CONVERSATION_RENAME = OpenApiExample("Rename", value={"title": "Trip to Porto"}, request_only=True)
CONVERSATION_PIN = OpenApiExample("Pin", value={"pinned": True}, request_only=True)
CONVERSATION_ARCHIVE = OpenApiExample("Archive", value={"archived": True}, request_only=True)
IDEMPOTENCY_KEY_REUSED = OpenApiExample(
    "Idempotency-Key reused for another message",
    value={"error": {"code": "idempotency_key_reused",
                     "message": "This Idempotency-Key was already used for a different message. Use a new key "
                                "for each new message, and the same key only to retry the same request.",
                     "details": {"run_id": "bad186fa-d421-49e7-8259-c7c86d989682"}}},
    response_only=True,
    status_codes=["422"],
)
MESSAGE_REQUEST = OpenApiExample(
    "Ask with tools",
    value={"content": "What time is it in Tokyo, and what is 17*23?", "tools": ["get_time", "calculator"],
           "max_iterations": 5, "on_active": "reject"},
    request_only=True,
)
RUN_ACCEPTED = OpenApiExample(
    "Run accepted",
    value={
        "conversation_id": "3a6e14e8-20fb-47a6-88bb-f1cc4b4fe6c5",
        "message_id": "70921f1c-0a83-4dd8-bbbc-085de0f7af9d",
        "run_id": "bad186fa-d421-49e7-8259-c7c86d989682",
        "status": "queued",
        "events_ws": "ws://127.0.0.1:8000/ws/runs/bad186fa-d421-49e7-8259-c7c86d989682/",
        "events_sse": "http://127.0.0.1:8000/api/runs/bad186fa-d421-49e7-8259-c7c86d989682/events/",
    },
    response_only=True,
    status_codes=["202"],
)
RUN_ACTIVE_ERROR = OpenApiExample(
    "Conversation busy (on_active=reject)",
    value={"error": {"code": "run_active",
                     "message": "This conversation has a run in progress (bad186fa-…). Wait for it, cancel it, or "
                                "send the message with on_active=enqueue … or on_active=interrupt …",
                     "details": {"active_run_id": "bad186fa-d421-49e7-8259-c7c86d989682"}}},
    response_only=True,
    status_codes=["409"],
)
UNKNOWN_TOOL_ERROR = OpenApiExample(
    "Unknown tool",
    value={"error": {"code": "unknown_tool",
                     "message": "Unknown tool(s): weather. Available tools: calculator, echo, get_time.",
                     "details": {"unknown": ["weather"], "available": ["calculator", "echo", "get_time"]}}},
    response_only=True,
    status_codes=["400"],
)
ASSISTANT_MESSAGE = OpenApiExample(
    "Messages with tool rounds",
    value=[
        {"id": "70921f1c-…", "role": "user", "content": "What is 6*7?", "tool_rounds": [], "status": "final"},
        {"id": "03d0f613-…", "role": "assistant", "content": "6*7 = 42.", "status": "final",
         "finish_reason": "stop", "model": "demo", "usage": {"total_tokens": 49},
         "tool_rounds": [{"iteration": 0, "assistant_response": "Let me check that.",
                          "tool_calls": [{"id": "call_1", "name": "calculator", "arguments": "{\"expression\": \"6*7\"}"}],
                          "results": [{"tool_call_id": "call_1", "name": "calculator",
                                       "output": "{\"expression\":\"6*7\",\"result\":42}", "status": "success",
                                       "execution_time_ms": 1}]}]},
    ],
    response_only=True,
    status_codes=["200"],
)
BRANCH_REQUEST = OpenApiExample(
    "Switch to another version", value={"message_id": "5c1f0a2e-8d4b-4f0e-9a51-2b7c3d9e6f10"}, request_only=True)
BRANCH_RESULT = OpenApiExample(
    "The new current branch",
    value={"current_leaf": "5c1f0a2e-8d4b-4f0e-9a51-2b7c3d9e6f10",
           "messages": [
               {"id": "70921f1c-0a83-4dd8-bbbc-085de0f7af9d", "role": "user", "content": "Name a colour.",
                "parent_id": None, "sibling_ids": ["70921f1c-0a83-4dd8-bbbc-085de0f7af9d"], "assistant": "",
                "status": "final"},
               {"id": "5c1f0a2e-8d4b-4f0e-9a51-2b7c3d9e6f10", "role": "assistant", "content": "Teal.",
                "parent_id": "70921f1c-0a83-4dd8-bbbc-085de0f7af9d",
                "sibling_ids": ["5c1f0a2e-8d4b-4f0e-9a51-2b7c3d9e6f10", "03d0f613-6b1e-4c52-9a0e-8f3d2c1b0a99"],
                "assistant": "", "status": "final", "model": "demo"}]},
    response_only=True,
    status_codes=["200"],
)
BRANCH_RUN_ACTIVE = OpenApiExample(
    "Conversation busy",
    value={"error": {"code": "run_active",
                     "message": "This conversation has a run in progress (bad186fa-…); wait for it or cancel it "
                                "before switching versions.",
                     "details": {"active_run_id": "bad186fa-d421-49e7-8259-c7c86d989682"}}},
    response_only=True,
    status_codes=["409"],
)
REGENERATE_REQUEST = OpenApiExample(
    "Answer again with another model", value={"model": "demo", "max_iterations": 3}, request_only=True)
REGENERATE_ACCEPTED = OpenApiExample(
    "Run accepted (the user message answered again)",
    value={
        "conversation_id": "3a6e14e8-20fb-47a6-88bb-f1cc4b4fe6c5",
        "message_id": "70921f1c-0a83-4dd8-bbbc-085de0f7af9d",
        "run_id": "c0ffee00-d421-49e7-8259-c7c86d989682",
        "status": "queued",
        "events_ws": "ws://127.0.0.1:8000/ws/runs/c0ffee00-d421-49e7-8259-c7c86d989682/",
        "events_sse": "http://127.0.0.1:8000/api/runs/c0ffee00-d421-49e7-8259-c7c86d989682/events/",
    },
    response_only=True,
    status_codes=["202"],
)
REGENERATE_RUN_ACTIVE = OpenApiExample(
    "Conversation busy",
    value={"error": {"code": "run_active",
                     "message": "This conversation has a run in progress (bad186fa-…); wait for it or cancel it "
                                "before editing or regenerating a message.",
                     "details": {"active_run_id": "bad186fa-d421-49e7-8259-c7c86d989682"}}},
    response_only=True,
    status_codes=["409"],
)
DELETE_RUN_ACTIVE = OpenApiExample(
    "A run of the branch is in progress",
    value={"error": {"code": "run_active",
                     "message": "A run of this branch is in progress (bad186fa-…); wait for it or cancel it "
                                "before deleting the message.",
                     "details": {"active_run_id": "bad186fa-d421-49e7-8259-c7c86d989682"}}},
    response_only=True,
    status_codes=["409"],
)
MESSAGE_EDIT = OpenApiExample(
    "Edit a message (a new version beside it)",
    value={"content": "What is 6*8?", "parent_id": "03d0f613-6b1e-4c52-9a0e-8f3d2c1b0a99"},
    request_only=True,
)
TOOL_INVOKE = OpenApiExample("Run the calculator", value={"arguments": {"expression": "6*7"}}, request_only=True)
TOOL_RESULT = OpenApiExample(
    "Executor result",
    value={"success": True, "result": {"expression": "6*7", "result": 42}, "tool_name": "calculator",
           "execution_time_ms": 1},
    response_only=True,
)

CONVERSATION = OpenApiExample(
    "Conversation",
    value={"id": "3a6e14e8-20fb-47a6-88bb-f1cc4b4fe6c5", "title": "What is 6*7?", "source": "chat",
           "pinned_at": "2026-01-02T09:00:00Z", "archived_at": None,
           "created_at": "2026-01-01T10:00:00Z", "updated_at": "2026-01-01T10:00:03Z"},
    response_only=True,
)
CONVERSATION_CREATE = OpenApiExample("New conversation", value={"title": "Trip planning"}, request_only=True)
RUN = OpenApiExample(
    "Completed run",
    value={"id": "bad186fa-d421-49e7-8259-c7c86d989682", "conversation_id": "3a6e14e8-…", "status": "completed",
           "model": "demo", "iteration": 1, "options": {"tools": ["calculator"], "max_iterations": 10},
           "cancel_requested": False, "error": "", "finish_reason": "stop", "max_iterations_reached": False,
           "usage": {"total_tokens": 49}, "message_id": "03d0f613-…", "created_at": "2026-01-01T10:00:00Z",
           "started_at": "2026-01-01T10:00:00Z", "finished_at": "2026-01-01T10:00:03Z"},
    response_only=True,
    status_codes=["200", "202"],
)
DECISION_REQUEST = OpenApiExample(
    "Deny, with a reason",
    value={"decision": "deny", "reason": "Not that account."},
    request_only=True,
)
DECISION_APPROVED = OpenApiExample(
    "Approved",
    value={"tool_call_id": "call_1", "name": "send_email", "arguments": "{\"to\": \"ana@example.com\"}",
           "status": "pending", "expires_at": "2026-01-01T10:10:00Z", "decision": "approve", "reason": "",
           "decided_by": "ana", "decided_at": "2026-01-01T10:00:05Z"},
    response_only=True,
    status_codes=["200"],
)
DECISION_CONFLICT = OpenApiExample(
    "Already decided otherwise",
    value={"error": {"code": "decision_conflict",
                     "message": "Tool call call_1 was already denied by ana at 2026-01-01T10:00:05.000Z; "
                                "a decision cannot be changed.",
                     "details": {"tool_call_id": "call_1", "decision": "deny",
                                 "decided_at": "2026-01-01T10:00:05.000Z"}}},
    response_only=True,
    status_codes=["409"],
)
NOT_FOUND = OpenApiExample(
    "Not found (or not yours)",
    value={"error": {"code": "not_found", "message": "Not found: it does not exist or you do not have access to it.",
                     "details": {}}},
    response_only=True,
    status_codes=["404"],
)
TOOL_LIST = OpenApiExample(
    "Tools",
    value=[{"name": "calculator", "description": "Evaluate an arithmetic expression.",
            "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                           "required": ["expression"], "additionalProperties": False},
            "kind": "code", "policy": {"timeout_s": 5.0, "max_attempts": 1, "side_effects": "read_only",
                                       "requires_approval": False, "pool": "process", "sandboxed": False,
                                       "cache_ttl_s": 0.0}}],
    response_only=True,
)
TOOL_TEST_REQUEST = OpenApiExample("Test a model", value={"query": "What is 6*7?", "model": "gpt-4o"},
                                   request_only=True)
TOOL_TEST_RESULT = OpenApiExample(
    "Test result",
    value={"model": "gpt-4o", "query": "What is 6*7?", "run_id": "…", "status": "completed", "success": True,
           "error": "", "tool_calls": [{"iteration": 0, "name": "calculator", "arguments": "{\"expression\": \"6*7\"}",
                                        "status": "success", "result": "{\"expression\":\"6*7\",\"result\":42}",
                                        "execution_time_ms": 1}],
           "answer": "42", "max_iterations_reached": False, "recorded": True,
           "validation": {"model": "gpt-4o", "tests": 5, "successes": 4, "success_rate": 0.8, "validated": True}},
    response_only=True,
    status_codes=["200"],
)
SECRET_NAMES = OpenApiExample("Secret names", value={"names": ["tavily_api_key", "anthropic_api_key"]},
                              response_only=True)
SECRET_VALUE = OpenApiExample("Store a secret", value={"value": "tvly-…"}, request_only=True)

# Files (docs/files.md).
FILE = OpenApiExample(
    "File",
    value={"id": "5b0c1d2e-8f3a-4c6b-9d7e-1a2b3c4d5e6f", "name": "report.pdf", "content_type": "application/pdf",
           "kind": "document", "size": 48213,
           "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
           "created_at": "2026-01-01T10:00:00Z", "conversation_id": "3a6e14e8-20fb-47a6-88bb-f1cc4b4fe6c5",
           "message_id": None, "source": "upload", "text_status": "pending", "text_error": "",
           "content_url": "/api/files/5b0c1d2e-8f3a-4c6b-9d7e-1a2b3c4d5e6f/content/"},
    response_only=True,
    status_codes=["200", "201"],
)
FILE_TOO_LARGE = OpenApiExample(
    "File too large",
    value={"error": {"code": "file_too_large",
                     "message": "The file is larger than the limit of 64.0 MiB (67108864 bytes) per file.",
                     "details": {"limit_bytes": 67108864}}},
    response_only=True,
    status_codes=["413"],
)
FILE_QUOTA_EXCEEDED = OpenApiExample(
    "File storage limit reached",
    value={"error": {"code": "file_quota_exceeded",
                     "message": "Storing this file (3.0 MiB) would go past your file storage limit: 1023.0 MiB of "
                                "1.0 GiB is used. Delete files you no longer need, or ask the operator for more.",
                     "details": {"used_bytes": 1072693248, "allowed_bytes": 1073741824, "file_bytes": 3145728}}},
    response_only=True,
    status_codes=["413"],
)
UNSUPPORTED_FILE_TYPE = OpenApiExample(
    "Type not taken",
    value={"error": {"code": "unsupported_file_type",
                     "message": "This file's contents are video/mp4, which is not taken. Files taken: images (PNG, "
                                "JPEG, GIF, WebP), PDF, Word (DOCX), Excel (XLSX), PowerPoint (PPTX), and UTF-8 "
                                "text (plain, Markdown, CSV, HTML, code). The type is read from the contents: "
                                "renaming a file does not change it.",
                     "details": {"sniffed_as": "video/mp4",
                                 "accepted": ["image/png", "image/jpeg", "image/gif", "image/webp",
                                              "application/pdf", "…"]}}},
    response_only=True,
    status_codes=["415"],
)
