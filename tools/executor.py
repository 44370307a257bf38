"""Executing one tool call from the model, always ending in a ``ToolResult``.

Whatever goes wrong - an unknown tool, bad JSON, arguments that break the
schema, a handler that raises or hangs - becomes a result whose error text goes
back to the model. A tool problem never crashes the run.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, assert_never

from tools import messages
from tools.arguments import (
    FilesUnavailable,
    RejectedArguments,
    check_file_arguments,
    parse_arguments,
    validate_arguments,
)
from tools.backoff import backoff_delay
from tools.base import Tool, ToolContext
from tools.errors import ToolArgumentError, ToolError, TransientToolError
from tools.redaction import redact_text, redact_value
from tools.registry import ToolRegistry
from tools.runner import Completed, Raised, TimedOut, run_with_timeout

logger = logging.getLogger(__name__)

ToolStatus = Literal["success", "error", "timeout"]

# Most characters of one tool output the model is sent. A tool that returns a
# whole web page or a huge JSON list would otherwise fill the model's context
# (and the bill) with one message. The engine sets it from settings at start-up.
DEFAULT_OUTPUT_LIMIT = 20_000
_output_limit = DEFAULT_OUTPUT_LIMIT


_log_payloads = False


def configure_payload_logging(enabled: bool) -> None:
    """Whether each invocation's arguments and output are logged too (at
    DEBUG). Off by default: they can hold users' data."""
    global _log_payloads
    _log_payloads = enabled


def configure_output_limit(max_chars: int) -> None:
    """Set the most characters ``ToolResult.output_text()`` returns, for all tools."""
    global _output_limit
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
        raise ValueError(f"The tool output limit must be a positive integer, got {max_chars!r}")
    _output_limit = max_chars


def output_limit() -> int:
    """The current limit set by ``configure_output_limit`` (``DEFAULT_OUTPUT_LIMIT`` until then)."""
    return _output_limit


@dataclass(frozen=True)
class ToolResult:
    """How one tool call ended; recorded by the run engine and sent back to the model."""

    tool_name: str
    status: ToolStatus
    result: Any = None  # when status == "success"
    error: str | None = None  # otherwise: the text the model sees
    execution_time_ms: int = 0  # the whole execution, retries and backoff included
    attempts: int = 1
    # True when the model caused the failure and can fix it by calling again
    # (unknown tool, bad JSON, invalid arguments, ToolArgumentError).
    retryable_by_model: bool = False
    # Why it failed, for metrics: unknown_tool, bad_arguments (not a JSON
    # object), validation (against the schema, or the handler's
    # ToolArgumentError), execution, timeout. None on success.
    error_kind: str | None = None
    # Served from the tool result cache instead of running the tool (the
    # engine's, docs/tools.md "Caching"); the executor itself never caches.
    cached: bool = False

    @property
    def success(self) -> bool:
        return self.status == "success"

    def as_dict(self) -> dict[str, Any]:
        """``{success, result | error, tool_name, execution_time_ms}``, the documented result shape,
        plus ``cached: true`` for a result served from the cache (left out otherwise)."""
        outcome: dict[str, Any] = {"result": self.result} if self.success else {"error": self.error}
        return {
            "success": self.success,
            **outcome,
            "tool_name": self.tool_name,
            "execution_time_ms": self.execution_time_ms,
            **({"cached": True} if self.cached else {}),
        }

    def output_text(self) -> str:
        """The content of the tool message sent back to the model.

        Strings pass through; anything else is compact JSON, keeping non-ASCII
        text readable (and cheaper in tokens) for the model. The text is cut to
        the output limit (``configure_output_limit``), ending with a marker
        that says so; ``result`` itself keeps the whole value.
        """
        return _truncated(self._full_text(), _output_limit)

    def _full_text(self) -> str:
        if not self.success:
            return self.error or ""
        if isinstance(self.result, str):
            return self.result
        return _to_json(self.result)


@dataclass(frozen=True)
class _Attempt:
    """How one attempt ended, before retries are decided."""

    status: ToolStatus
    result: Any = None
    error: str | None = None
    retryable_by_model: bool = False
    transient: bool = False  # another attempt might succeed
    # The least wait before the next attempt that the failed service asked for
    # (an HTTP Retry-After), carried by the TransientToolError as ``retry_after_s``.
    retry_after_s: float = 0.0
    error_kind: str | None = None


def execute_tool(
    registry: ToolRegistry,
    name: str,
    arguments: str | dict[str, Any] | None,
    *,
    context: ToolContext | None = None,
    on_retry: Callable[[int, str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> ToolResult:
    """Look up, validate and run tool ``name``, retrying transient failures per its policy.

    Blocks the calling thread for at most about ``max_attempts`` timeouts plus
    backoff. Each attempt runs in its own daemon thread (see ``tools.runner``):
    a sync handler that times out cannot be killed and keeps running detached
    until it returns - the hard ``time_limit`` of the Celery tools queue is the
    backstop - so side-effecting tools should honour their own timeouts too.

    ``on_retry(failed_attempt, error_text)`` is called before each retry (e.g.
    to record the attempt); an exception it raises propagates, as it is the
    caller's problem, not the tool's. ``sleep`` is injectable so tests need not
    wait.

    Every secret value the call was handed (``context.secrets_seen``) is
    scrubbed from each attempt's result and error before anything else sees
    them: the retry hook, the logs, the returned ``ToolResult``.
    """
    started = time.monotonic()
    context = context if context is not None else ToolContext()

    def finish(attempt: _Attempt, attempts: int) -> ToolResult:
        result = ToolResult(
            tool_name=name,
            status=attempt.status,
            result=attempt.result,
            error=attempt.error,
            execution_time_ms=int((time.monotonic() - started) * 1000),
            attempts=attempts,
            retryable_by_model=attempt.retryable_by_model,
            error_kind=attempt.error_kind or (None if attempt.status == "success" else
                                              "timeout" if attempt.status == "timeout" else "execution"),
        )
        # Name, status, duration and attempts only: arguments and outputs can
        # hold user data and stay out of logs.
        logger.info(
            "Tool %s finished: status=%s duration_ms=%d attempts=%d",
            name,
            result.status,
            result.execution_time_ms,
            result.attempts,
            extra={
                "tool_name": name,
                "tool_status": result.status,
                "duration_ms": result.execution_time_ms,
                "attempts": result.attempts,
            },
        )
        if _log_payloads:
            logger.debug("Tool %s arguments=%r output=%r", name, arguments, result.output_text())
        return result

    tool = registry.get(name)
    if tool is None:
        return finish(_model_error(messages.unknown_tool(name, registry.names()), "unknown_tool"), attempts=0)
    try:
        parsed = parse_arguments(arguments)
    except RejectedArguments as exc:
        return finish(_model_error(str(exc), "bad_arguments"), attempts=0)
    try:
        validate_arguments(tool, parsed)
        check_file_arguments(tool, parsed, context.files)
    except RejectedArguments as exc:
        return finish(_model_error(str(exc), "validation"), attempts=0)
    except FilesUnavailable as exc:
        return finish(_Attempt(status="error", error=str(exc), error_kind="execution"), attempts=0)

    attempts = 0
    while True:
        attempts += 1
        attempt = _attempt(tool, copy.deepcopy(parsed), context)
        if not _may_retry(tool, attempt) or attempts >= tool.policy.max_attempts:
            return finish(attempt, attempts)
        delay = max(backoff_delay(tool.policy, attempts), attempt.retry_after_s)
        logger.info(
            "Tool %s attempt %d failed (%s), retrying in %.2fs",
            name,
            attempts,
            attempt.status,
            delay,
        )
        if on_retry is not None:
            on_retry(attempts, attempt.error or "")
        sleep(delay)
        if context.cancelled():
            # The run was cancelled while we waited: no further attempt.
            return finish(attempt, attempts)


def _attempt(tool: Tool, arguments: dict[str, Any], context: ToolContext) -> _Attempt:
    """Run the handler once under the tool's timeout, classify how it ended,
    and scrub the secrets the call was handed from what it gave back."""
    attempt = _classified(tool, arguments, context)
    secrets = context.secrets_seen.values()
    if not secrets:
        return attempt
    return dataclasses.replace(
        attempt,
        result=redact_value(attempt.result, secrets),
        error=redact_text(attempt.error, secrets) if attempt.error else attempt.error,
    )


def _classified(tool: Tool, arguments: dict[str, Any], context: ToolContext) -> _Attempt:
    outcome = run_with_timeout(
        tool.handler,
        arguments,
        context,
        timeout_s=tool.policy.timeout_s,
        thread_name=f"tool-{tool.name}",
    )
    if isinstance(outcome, Completed):
        return _completed(tool, outcome.value)
    if isinstance(outcome, TimedOut):
        return _Attempt(
            status="timeout", error=messages.timed_out(tool.name, tool.policy.timeout_s), transient=True
        )
    if isinstance(outcome, Raised):
        return _failed(tool, outcome.error, context)
    assert_never(outcome)


def _completed(tool: Tool, value: Any) -> _Attempt:
    """A success, unless the value cannot be stored and sent as JSON (a handler bug)."""
    if isinstance(value, str):
        return _Attempt(status="success", result=value)
    try:
        _to_json(value)
    except (TypeError, ValueError) as exc:
        logger.warning("Tool %s returned a value that is not JSON-serializable", tool.name)
        return _Attempt(
            status="error",
            error=messages.handler_error(
                tool.name, f"the tool returned a result that is not valid JSON ({exc})"
            ),
        )
    return _Attempt(status="success", result=value)


def _failed(tool: Tool, error: BaseException, context: ToolContext) -> _Attempt:
    """Turn a handler's exception into the attempt the model and the retry loop see."""
    if isinstance(error, ToolArgumentError):
        return _model_error(messages.handler_argument_error(tool.name, _message(error)), "validation")
    if isinstance(error, TransientToolError):
        return _Attempt(
            status="error",
            error=messages.handler_error(tool.name, _message(error)),
            transient=True,
            retry_after_s=float(getattr(error, "retry_after_s", None) or 0.0),
        )
    if isinstance(error, ToolError):
        return _Attempt(status="error", error=messages.handler_error(tool.name, _message(error)))
    # An unexpected exception is a bug in the tool: name its class (the model
    # may relay it to the user) but never a traceback. Operators get the
    # traceback only at DEBUG, because exception messages can quote user data.
    logger.warning("Tool %s raised unexpected %s", tool.name, type(error).__name__)
    if logger.isEnabledFor(logging.DEBUG):
        trace = "".join(traceback.format_exception(error))
        logger.debug("Tool %s traceback:\n%s", tool.name, redact_text(trace, context.secrets_seen.values()))
    detail = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return _Attempt(status="error", error=messages.handler_error(tool.name, detail))


def _may_retry(tool: Tool, attempt: _Attempt) -> bool:
    """Whether repeating the call could succeed and cannot cause a double effect."""
    return attempt.transient and tool.policy.side_effects != "not_idempotent"


def _model_error(text: str, kind: str) -> _Attempt:
    return _Attempt(status="error", error=text, retryable_by_model=True, error_kind=kind)


def _message(error: ToolError) -> str:
    return str(error) or type(error).__name__


def _truncated(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its start plus a marker, ``limit`` in all."""
    if len(text) <= limit:
        return text
    # Sized with ``limit`` in the marker: the number actually shown has no more
    # digits, so the real marker is no longer and the total stays within limit.
    shown = limit - len(messages.truncated_output(len(text), limit))
    if shown <= 0:
        return text[:limit]  # a limit smaller than the marker: the bare cut is all that fits
    return text[:shown] + messages.truncated_output(len(text), shown)


def _to_json(value: Any) -> str:
    """Compact, strict JSON (no NaN), as stored and as sent to the model."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
