"""One application error base: a code, an HTTP status and a message a person
can act on. The API's exception handler turns these into JSON."""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    INVALID_REQUEST = "invalid_request"
    UNKNOWN_TOOL = "unknown_tool"
    UNKNOWN_MODEL = "unknown_model"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    RUN_ACTIVE = "run_active"
    TOO_MANY_ACTIVE_RUNS = "too_many_active_runs"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    APPROVAL_REQUIRED = "approval_required"
    DECISION_CONFLICT = "decision_conflict"
    TOKEN_BUDGET_EXHAUSTED = "token_budget_exhausted"
    # Files (docs/files.md).
    FILE_TOO_LARGE = "file_too_large"
    FILE_QUOTA_EXCEEDED = "file_quota_exceeded"
    UNSUPPORTED_FILE_TYPE = "unsupported_file_type"
    FILE_UNREADABLE = "file_unreadable"
    IMAGES_NOT_SUPPORTED = "images_not_supported"


class ChatForgeError(Exception):
    code: ErrorCode = ErrorCode.INVALID_REQUEST
    status_code: int = 400

    def __init__(self, message: str, *, details: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}
        self.headers = headers or {}  # e.g. Retry-After


class InvalidRequest(ChatForgeError):
    pass


class UnknownTool(ChatForgeError):
    code = ErrorCode.UNKNOWN_TOOL


class RunNotActive(ChatForgeError):
    code = ErrorCode.CONFLICT
    status_code = 409


class RunActive(ChatForgeError):
    """Double-texting with on_active=reject: the conversation is busy."""

    code = ErrorCode.RUN_ACTIVE
    status_code = 409


class TooManyActiveRuns(ChatForgeError):
    code = ErrorCode.TOO_MANY_ACTIVE_RUNS
    status_code = 429


class TokenBudgetExhausted(ChatForgeError):
    """The user's token budget for the period is used up (admin: user limits)."""

    code = ErrorCode.TOKEN_BUDGET_EXHAUSTED
    status_code = 429


class IdempotencyKeyReused(ChatForgeError):
    """An Idempotency-Key already used for a different message."""

    code = ErrorCode.IDEMPOTENCY_KEY_REUSED
    status_code = 422


class NotFound(ChatForgeError):
    code = ErrorCode.NOT_FOUND
    status_code = 404


class DecisionConflict(ChatForgeError):
    """A tool call was already decided otherwise, or no longer awaits a decision."""

    code = ErrorCode.DECISION_CONFLICT
    status_code = 409


class ApprovalRequired(ChatForgeError):
    """/v1 named tools that need a person's approval, and the server is set
    to refuse such requests (CHATFORGE_V1_APPROVAL=reject)."""

    code = ErrorCode.APPROVAL_REQUIRED


class FileTooLarge(ChatForgeError):
    code = ErrorCode.FILE_TOO_LARGE
    status_code = 413


class FileQuotaExceeded(ChatForgeError):
    code = ErrorCode.FILE_QUOTA_EXCEEDED
    status_code = 413


class UnsupportedFileType(ChatForgeError):
    code = ErrorCode.UNSUPPORTED_FILE_TYPE
    status_code = 415


class FileUnreadable(ChatForgeError):
    """An attached document whose text could not be read (damaged, encrypted):
    the message that carries it is refused rather than sent without it."""

    code = ErrorCode.FILE_UNREADABLE


class ImagesNotSupported(ChatForgeError):
    code = ErrorCode.IMAGES_NOT_SUPPORTED
