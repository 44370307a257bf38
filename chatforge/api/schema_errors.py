"""Every error status an operation can answer, in the OpenAPI description.

drf-spectacular documents what a view declares; the errors that come from
around the view - authentication, the bad-token throttle, a CSRF check, a
body too large or not JSON, an unknown id, an outage - it cannot see, so a
client (and schemathesis' status-code check) met statuses the schema did not
list. This post-processing hook adds them where they can happen, with the
error body of the path's API (ours, or OpenAI's on /v1), and leaves any
response an operation documents itself untouched.
"""

from __future__ import annotations

from typing import Any

_METHODS = ("get", "put", "post", "patch", "delete")
_UNSAFE = ("put", "post", "patch", "delete")

_DESCRIPTIONS = {
    "400": "Bad request: invalid fields, a body that is not JSON (or nested too deep, or holding a NUL "
           "character), a Host this server does not answer to",
    "401": "Not signed in, or the API token is invalid or revoked",
    "403": "Not allowed: missing permission, or a session request without its CSRF token",
    "404": "Not found: no such object of yours (other users' objects are not found either)",
    "413": "The request body is larger than CHATFORGE_MAX_REQUEST_BYTES",
    "429": "Too many requests (messages, or failed tokens from this address); see Retry-After",
    "503": "The database or Redis is unreachable; nothing was done, retry after Retry-After",
}
_OPENAI_ERROR_SCHEMA = "OpenAIErrorResponse"
_ERROR_SCHEMA = "ErrorResponse"


def _statuses(method: str, operation: dict[str, Any]) -> list[str]:
    statuses = ["400", "503"]
    if operation.get("security") != [] and operation.get("security") != [{}]:
        statuses += ["401", "429"]
    if any(p.get("in") == "path" for p in operation.get("parameters", [])):
        statuses.append("404")
    if method in _UNSAFE:
        statuses.append("403")
        if "requestBody" in operation or method in ("put", "post", "patch"):
            statuses.append("413")
    return statuses


def add_error_responses(result: dict[str, Any], generator, request, public) -> dict[str, Any]:
    """drf-spectacular post-processing hook (runs after ``add_non_drf_paths``)."""
    for path, operations in result.get("paths", {}).items():
        schema = _OPENAI_ERROR_SCHEMA if path.startswith("/v1/") else _ERROR_SCHEMA
        for method, operation in operations.items():
            if method not in _METHODS:
                continue
            responses = operation.setdefault("responses", {})
            for status in _statuses(method, operation):
                responses.setdefault(status, {
                    "description": _DESCRIPTIONS[status],
                    "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}},
                })
    return result
