"""One tool call of a round: claim it, run it through the executor (which
turns every failure into a result for the model), record the output, and —
if it is the last call of its round to finish — start the next model turn.

The fan-in is decided in the write that records the output (one
statement on Postgres, ``call_record.py``; a transaction elsewhere), by
one UPDATE of the run row that counts the round's pending calls down
(``Run.pending_tool_calls``, set when the turn recorded its calls). The
UPDATE locks the row until that write commits, and Postgres evaluates
each waiting UPDATE against the row as the one before it left it, so
exactly one call of the round takes the count to zero; in the same
statement it moves the run to the next iteration, and then it creates the
next turn's row, so the next turn is enqueued exactly once, even when the
calls finish at the same instant on different hosts. Each call is counted
once: only the delivery whose conditional UPDATE moved the call from
``running`` to finished gets this far.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from chatforge.catalog.catalog import get_catalog
from chatforge.conversations.models import LlmTurn, Run, ToolInvocation
from chatforge.db.connections import release_connections
from chatforge.db.sql_rows import insert_all, update_where
from chatforge.observability import record
from chatforge.observability.log_context import bind_run
from chatforge.observability.tracing import step_span
from chatforge.scheduling.slots import call_step_id
from chatforge.scheduling.usage import take_tool_call
from orchestration.event_log import events
from orchestration.queueing import dispatch
from orchestration.services.tool_cache import CallCache, call_cache
from orchestration.services.tool_context import tool_context_for
from orchestration.services.tool_files import ConversationFiles, files_returned_by
from tools.base import Tool
from tools.executor import ToolResult, execute_tool
from tools.files import FileAccess, FileInfo, ReturnedFile, returned_files_line

from .approval_policy import APPROVAL_MODE, APPROVAL_TOOLS, UNATTENDED_DENY, unattended_output
from .call_record import CountedOff, count_off, record_call_and_count_off
from .claims import claim_invocation, extras_of
from .client_tools import round_awaits_client
from .finalize import Outcome, run_finalize, step_must_stop
from .heartbeat import step_lease
from .ledger import ref

logger = logging.getLogger(__name__)


def _error_result(name: str, text: str, kind: str) -> ToolResult:
    """A result recorded without running the tool; ``kind`` says why (metrics)."""
    return ToolResult(tool_name=name, status="error", error=text, error_kind=kind)


def _preset_result(inv: ToolInvocation) -> ToolResult | None:
    """The result to record without running the tool, when running it (again)
    is wrong; None when it should run."""
    if inv.deliveries > settings.CHATFORGE_MAX_STEP_DELIVERIES:
        return _error_result(
            inv.name,
            f"Error: tool '{inv.name}' could not be completed: its worker stopped "
            f"{inv.deliveries - 1} times while running it.",
            "interrupted",
        )
    options = inv.run.options
    if inv.name in options.get(APPROVAL_TOOLS, ()) and options.get(APPROVAL_MODE) == UNATTENDED_DENY:
        return _error_result(inv.name, unattended_output(inv.name), "declined")  # /v1 cannot ask anyone
    tool = get_catalog().get(inv.name)
    if inv.deliveries > 1 and tool is not None and tool.policy.side_effects == "not_idempotent":
        # An earlier delivery started it: it may already have taken effect.
        return _error_result(
            inv.name,
            f"Error: tool '{inv.name}' was interrupted while running and is not safe to "
            "run again; it may or may not have taken effect.",
            "interrupted",
        )
    return None


def _normalized(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments or "{}"), sort_keys=True, separators=(",", ":"))
    except json.JSONDecodeError:
        return arguments


def _repeat_result(inv: ToolInvocation) -> ToolResult | None:
    """An error result when the model keeps calling the same tool with the
    same arguments (docs/tool-catalog.md, "Circular calls"); None otherwise."""
    limit = settings.CHATFORGE_TOOL_REPEAT_LIMIT
    earlier = extras_of(inv).earlier_arguments  # read by the claim on Postgres
    if earlier is None:
        earlier = ToolInvocation.objects.filter(run_id=inv.run_id, name=inv.name).filter(
            Q(iteration__lt=inv.iteration) | Q(iteration=inv.iteration, position__lt=inv.position)
        ).values_list("arguments", flat=True)
    mine = _normalized(inv.arguments)
    repeats = sum(1 for args in earlier if _normalized(args) == mine)
    if repeats < limit:
        return None
    logger.warning("run %s: tool %s called again with the same arguments (%s earlier calls)", inv.run_id, inv.name, repeats)
    return _error_result(
        inv.name,
        f"Error: '{inv.name}' was already called {repeats} times with these same arguments in this "
        "request. Do not repeat the call: use the results you already have, or call it with "
        "different arguments.",
        "repeated",
    )


def record_result(inv: ToolInvocation, result: ToolResult, *, from_status: str = "running",
                  files: Sequence[FileInfo] = ()) -> None:
    """Record the output and count the call off its round, atomically
    (one statement on Postgres, ``call_record.py``; a transaction
    elsewhere). ``from_status``: the state the call must still be in
    (``running`` for a delivery that ran it; ``awaiting_approval`` for a
    call denied unrun). ``files``: those the call saved (``tool_files``):
    named on the result, in its ``tool_output`` event, and in a line after
    the output the model reads (after the output limit's cut, so the ids
    always reach it)."""
    output = result.output_text() + (returned_files_line(files) if files else "")
    returned = [file.returned() for file in files]
    now = timezone.now()
    run = inv.run
    values = {
        "status": result.status,
        "output": output,
        "result": {**result.as_dict(), **({"files": returned} if returned else {})},
        **({"error": result.error} if result.error else {}),  # a success keeps the last retry's error
        "attempts": result.attempts,
        "duration_ms": result.execution_time_ms,
        "finished_at": now,
    }
    cap = run.options.get("max_iterations", settings.CHATFORGE_MAX_ITERATIONS)
    if connection.vendor == "postgresql" and not run.options.get("client_tools"):
        # A round of a run with client tools may end in the client's hands
        # rather than in a turn: that decision stays in the transaction below.
        outcome = record_call_and_count_off(inv, values, from_status=from_status, now=now, offer_tools_below=cap)
        if outcome.recorded:
            _counted_off(inv, result, output, outcome.counted, returned)
        return
    with transaction.atomic():
        if not update_where(ToolInvocation, values, pk=inv.pk, status=from_status, deliveries=inv.deliveries):
            return  # a parallel delivery recorded it first (and counted it)
        counted = count_off(inv, now)
        if not _counted_off(inv, result, output, counted, returned):
            return
        if round_awaits_client(run, inv.iteration):
            # The server's calls are done; the client's are the client's to run.
            run_finalize(run_id=str(run.id), outcome=Outcome.COMPLETED)
            return
        insert_all(LlmTurn(run_id=run.id, iteration=counted.iteration, offered_tools=counted.iteration < cap))
        dispatch.llm_turn(run, counted.iteration)


def _counted_off(inv: ToolInvocation, result: ToolResult, output: str, counted: CountedOff | None,
                 files: list[ReturnedFile] | None = None) -> bool:
    """What follows a recorded call's count-off: its output to clients,
    and, when it ended its round, the next turn sent (if the statement
    created it) or the run cancelled. Returns whether the round ended and
    the run goes on without a turn yet (the transactional path creates it)."""
    record.tool_recorded(inv.name, result)
    if counted is None:
        return False  # the run has ended (or left this round)
    run = inv.run
    events.tool_output(ref(run), tool_call_id=inv.tool_call_id, name=inv.name, output=output,
                       status=result.status, execution_time_ms=result.execution_time_ms, files=files,
                       cached=result.cached)
    if counted.pending > 0:
        return False  # other calls of the round are still running
    if counted.cancel_requested:
        transaction.on_commit(lambda: run_finalize(run_id=str(run.id), outcome=Outcome.CANCELLED))
        return False
    if counted.next_turn_created:
        dispatch.llm_turn(run, counted.iteration)
        return False
    return True


def _record_failed_attempt(run: Run, inv: ToolInvocation, attempt: int, error: str) -> None:
    """Before each retry: the attempt count and last error go on the
    invocation (as data, not only in logs) and to clients as tool.retry."""
    ToolInvocation.objects.filter(pk=inv.pk).update(attempts=attempt, error=error)
    record.tool_retried(inv.name)
    events.tool_retry(ref(run), tool_call_id=inv.tool_call_id, attempt=attempt, error=error)


def tool_call_execute(*, run_id: str, tool_call_id: str) -> None:
    started = time.perf_counter()
    inv = claim_invocation(run_id, tool_call_id)
    if inv is None:
        # Finished already (the fan-in happened with it), or a live delivery
        # runs it (and gives its slots back when it ends).
        running = ToolInvocation.objects.filter(run_id=run_id, tool_call_id=tool_call_id, status="running")
        dispatch.step_ended(call_step_id(run_id, tool_call_id), unless=running.exists)
        return
    try:
        _run_claimed_call(inv, started)
    finally:
        dispatch.step_ended(call_step_id(run_id, tool_call_id))


def _quota_result(inv: ToolInvocation) -> ToolResult | None:
    """An error result when the user's daily quota of the tool is used up
    (counting this call if not); None when the call may run."""
    refusal = take_tool_call(inv.run.user_id, inv.name)
    if refusal is None:
        return None
    record.quota_refused(inv.name)
    return _error_result(inv.name, refusal, "quota")


def _returned_files(inv: ToolInvocation, handle: FileAccess | None) -> list[FileInfo]:
    """The files the call saved, looked up by its run and call id: when this
    delivery saved any, or when an earlier delivery may have (a redelivery
    whose handler saved nothing this time still reports them). A call that
    saved none costs no statement."""
    saved_now = isinstance(handle, ConversationFiles) and handle.saved_any
    if not saved_now and inv.deliveries <= 1:
        return []
    return files_returned_by(run_id=str(inv.run_id), tool_call_id=inv.tool_call_id)


def _call_cache(inv: ToolInvocation, tool: Tool | None) -> CallCache | None:
    """Where this call's result is cached (docs/tools.md, "Caching"); None
    when its tool declares no cache TTL."""
    run = inv.run
    return call_cache(tool, inv.arguments, user_id=run.user_id, conversation_id=str(run.conversation_id))


def _run_claimed_call(inv: ToolInvocation, started: float) -> None:
    run_id, run = str(inv.run_id), inv.run
    bind_run(run)
    record.redelivered("tool_call", inv.deliveries)
    if step_must_stop(run):
        return
    catalog = get_catalog()
    tool = catalog.get(inv.name)
    result = _preset_result(inv) or _repeat_result(inv)
    # A cached answer is looked up before the quota is taken: a call that
    # runs nothing uses none of the tool's daily quota.
    cache = _call_cache(inv, tool) if result is None else None
    result = result or (cache.lookup() if cache is not None else None) or _quota_result(inv)
    handle: FileAccess | None = None
    ran = result is None
    if result is None:
        # The tool may take its whole timeout: its database connection goes
        # back to the pool meanwhile, so a tools_io worker's threads waiting
        # on the network hold none (a retry's note and the record borrow one).
        release_connections()
        with step_lease(run_id, inv), step_span("tool.call", **{"chatforge.run_id": run_id, "chatforge.tool": inv.name,
                                                                 "chatforge.tool_call_id": inv.tool_call_id}):
            context = tool_context_for(user_id=run.user_id, run_id=run_id, tool_call_id=inv.tool_call_id,
                                       user_ciphertexts=extras_of(inv).user_ciphertexts,
                                       conversation_id=str(run.conversation_id),
                                       policy=tool.policy if tool is not None else None)
            result = execute_tool(
                catalog,
                inv.name,
                inv.arguments,
                context=context,
                on_retry=lambda attempt, error: _record_failed_attempt(run, inv, attempt, error),
            )
        handle = context.files
    files = _returned_files(inv, handle)
    record_result(inv, result, files=files)
    if ran and cache is not None:
        cache.store(result, files)
    record.step_overhead("tool_call", time.perf_counter() - started - result.execution_time_ms / 1000)
