"""One model turn of a run: claim it in the ledger, stream the model's answer
as events, then record the turn and fan out its tool calls — or finalize.

A turn is memoised: once completed it is never called again, and a delivery
that finds it completed only re-emits its events and moves on.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from chatforge.catalog.catalog import get_catalog
from chatforge.conversations.models import LlmTurn, Message, Run, ToolInvocation
from chatforge.db.connections import release_connections
from chatforge.db.sql_rows import insert_rows, update_statement, update_where
from chatforge.llm.providers.base import ProviderError
from chatforge.llm.resolution import ResolvedModel, resolve
from chatforge.llm.providers.base import (
    ChatProvider,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    TurnRequest,
    TurnResult,
)
from chatforge.llm.providers.retry_policy import policy_for
from chatforge.llm.providers.sampling import SAMPLING_OPTIONS
from chatforge.observability import record
from chatforge.observability.log_context import bind_run
from chatforge.observability.tracing import step_span
from chatforge.scheduling.slots import turn_step_id
from chatforge.scheduling.usage import count_tokens, counts_tokens, token_budget
from orchestration.event_log import events
from orchestration.queueing import dispatch
from orchestration.transcript.history import TurnInput, input_for_turn

from ..event_log.delta_coalescer import DeltasNotPublished, WindowPolicy, coalescer_for
from .approval_policy import APPROVAL_MODE, APPROVAL_TOOLS, UNATTENDED_DENY
from .approvals import announce_requests, approval_deadline
from .attachments import ATTACHMENTS_OPTION, wait_for_attachments
from .cancel_watch import CHECK_INTERVAL_S, cancel_watch
from .claims import claim_turn, extras_of, mark_run_running, release_turn
from .client_tools import client_tool_names
from .finalize import Outcome, run_finalize, step_must_stop
from .heartbeat import Lease, step_lease
from .ledger import ref
from .outage_retry import retry_through_outage
from .turn_record import record_turn_with_calls

logger = logging.getLogger(__name__)

# How often the streaming loop looks at the cancel flag (answered for the
# whole process by one query a second: cancel_watch.py).
_CHECK_INTERVAL_S = CHECK_INTERVAL_S


@dataclass(frozen=True)
class _Streamed:
    result: TurnResult | None  # None: cancelled or failed mid-stream
    partial_text: str
    provider_ms: int
    failure: ProviderError | None = None  # why the model call failed
    cancelled: bool = False
    taken_over: bool = False  # given to another delivery: this one records and publishes nothing


def emit_tool_call_events(run: Run, invocations: list[ToolInvocation]) -> None:
    """The round's ``tool_call`` events (deduplicated: a repeat reaches the log once)."""
    for inv in invocations:
        events.tool_call(
            ref(run),
            tool_call_id=inv.tool_call_id,
            name=inv.name,
            arguments=inv.arguments,
            iteration=inv.iteration,
            text_offset=inv.text_offset,
            client=inv.status == ToolInvocation.Status.CLIENT,
        )


def _delta_window() -> WindowPolicy:
    return WindowPolicy.from_ms(
        min_ms=settings.CHATFORGE_DELTA_COALESCE_MS,
        max_ms=settings.CHATFORGE_DELTA_COALESCE_MAX_MS,
        events_per_s=settings.CHATFORGE_DELTA_EVENTS_PER_S,
    )


def _stream(run: Run, provider: ChatProvider, request: TurnRequest, *, provider_kind: str = "",
            lease: Lease | None = None) -> _Streamed:
    """Call the model once, publishing deltas as they arrive. Provider failures
    and unexpected adapter errors end in a ``_Streamed`` with ``failure`` set
    (and the text streamed so far); database errors propagate so the task retries.
    Before each delta it asks ``lease`` whether the turn was given to another
    delivery (free while this process renews its liveness on time)."""
    r = ref(run)
    parts: list[str] = []
    result: TurnResult | None = None
    started = time.monotonic()
    next_check = started + _CHECK_INTERVAL_S
    stream = provider.stream_turn(request)
    failure: ProviderError | None = None
    cancelled = taken_over = False
    first_token = True
    try:
        with coalescer_for(r, events.deltas, policy=_delta_window()) as deltas:
            for item in stream:
                if lease is not None and lease.lost():
                    deltas.discard()
                    result, taken_over = None, True
                    break
                if first_token and isinstance(item, (TextDelta, ReasoningDelta)):
                    first_token = False
                    record.time_to_first_token(provider_kind, run.model, time.monotonic() - started)
                if isinstance(item, TextDelta):
                    if item.text:
                        parts.append(item.text)
                        deltas.add("content", item.text)
                elif isinstance(item, ReasoningDelta):
                    deltas.add("reasoning", item.text)
                elif isinstance(item, TurnResult):
                    result = item
                if time.monotonic() >= next_check:
                    next_check = time.monotonic() + _CHECK_INTERVAL_S
                    if cancel_watch.should_stop(str(run.id)):
                        result, cancelled = None, True
                        break
    except ProviderError as exc:
        result, failure = None, exc
    except (DatabaseError, events.EventLogUnavailable):
        raise  # infrastructure, not the model: the step is run again
    except DeltasNotPublished as exc:
        raise events.EventLogUnavailable(str(exc)) from exc
    except Exception as exc:  # a bug in an adapter must not leave the run hanging
        logger.exception("run %s: unexpected error while streaming from %s", run.id, run.model)
        result = None
        failure = ProviderError(
            f"Internal error while talking to the model ({type(exc).__name__}); "
            "the details are in the worker log.",
            retryable=False,
        )
    finally:
        stream.close()  # closes the upstream connection when we stop early
    elapsed_ms = int((time.monotonic() - started) * 1000)
    return _Streamed(result, "".join(parts), elapsed_ms, failure, cancelled, taken_over)


def _wait_unless_cancelled(run_id: str, seconds: float, lease: Lease | None = None) -> bool:
    """Sleep, looking at the cancel flag (and the lease) every second; False
    if cancelled or given to another delivery."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, _CHECK_INTERVAL_S))
        if cancel_watch.should_stop(run_id) or (lease is not None and lease.lost()):
            return False
    return True


def _call_model(run: Run, turn: LlmTurn, resolved: ResolvedModel, request: TurnRequest,
                lease: Lease | None = None) -> _Streamed:
    """The turn's model call with its provider's retry policy: transient
    failures are retried with backoff (honouring Retry-After), and each retry
    is announced with llm.retry so clients drop the partial text."""
    policy = policy_for(resolved.kind)
    attempt = 1
    while True:
        streamed = _stream(run, resolved.provider, request, provider_kind=resolved.kind, lease=lease)
        if streamed.taken_over:
            return streamed
        failure = streamed.failure
        will_retry = (failure is not None and failure.retryable and attempt < policy.max_attempts
                      and not (request.previous_response_id and "previous_response_not_found" in failure.message))
        record.provider_attempt(resolved.kind, run.model, failure_kind=str(failure.kind) if failure else None,
                                retried=will_retry)
        if failure is not None and request.previous_response_id and "previous_response_not_found" in failure.message:
            # The provider no longer has the stored response (expired, or
            # another project): send the whole history instead, once.
            logger.info("run %s: stored response %s is gone; sending the full history",
                        run.id, request.previous_response_id)
            request = dataclasses.replace(request, previous_response_id=None)
            continue
        if failure is None or not failure.retryable or attempt >= policy.max_attempts:
            if failure is not None and failure.retryable:
                message = f"{failure.message} (gave up after {attempt} attempts)"
                streamed = _Streamed(None, streamed.partial_text, streamed.provider_ms,
                                     ProviderError(message, retryable=False, kind=failure.kind))
            return streamed
        delay = policy.delay(attempt, failure.retry_after_s)
        logger.warning("run %s turn %s attempt %s failed (%s); retrying in %.1fs",
                       run.id, turn.iteration, attempt, failure.kind, delay)
        events.llm_retry(ref(run), iteration=turn.iteration, attempt=attempt, error=failure.message,
                         retry_in_s=round(delay, 2), discard_text=bool(streamed.partial_text))
        if not _wait_unless_cancelled(str(run.id), delay, lease):
            taken_over = lease is not None and lease.lost()
            return _Streamed(None, "", streamed.provider_ms, cancelled=not taken_over, taken_over=taken_over)
        attempt += 1


def _previous_response_id(run: Run, turn_input: TurnInput, iteration: int) -> str | None:
    """Where a Responses-API conversation continues from (docs/providers.md,
    "Responses API continuation"): this run's last turn, else the
    conversation's last assistant message."""
    if iteration > 0:
        return turn_input.last_response_id
    return (
        Message.objects.filter(conversation_id=run.conversation_id, role=Message.Role.ASSISTANT,
                               status=Message.Status.FINAL, model=run.model)
        .exclude(response_id="")
        .order_by("-created_at")
        .values_list("response_id", flat=True)
        .first()
    )


def _request(run: Run, turn: LlmTurn, resolved: ResolvedModel, turn_input: TurnInput) -> TurnRequest:
    """Only what the model supports: tools, streaming, reasoning controls."""
    wanted = {
        "reasoning_effort": resolved.supports_reasoning,
        "verbosity": resolved.supports_verbosity,
        "temperature": True,
        "max_tokens": True,
        **dict.fromkeys(SAMPLING_OPTIONS, True),
    }
    options = {k: v for k, v in run.options.items() if wanted.get(k)}
    if turn.iteration > 0 and options.get("tool_choice") not in (None, "auto", "none"):
        # A forced choice ("required", a named function) holds for the first
        # turn only: forcing every turn, the model could never answer.
        del options["tool_choice"]
    offer_tools = turn.offered_tools and resolved.supports_tools
    return TurnRequest(
        model=resolved.upstream_model,
        messages=turn_input.messages,
        tools=offered_tool_specs(run) if offer_tools else [],
        options=options,
        previous_response_id=(
            _previous_response_id(run, turn_input, turn.iteration) if resolved.kind == "openai_responses" else None
        ),
        stream=resolved.supports_streaming,
    )


def offered_tool_specs(run: Run) -> list[dict]:
    """The server's tools of the run, then the /v1 client's own (stored as
    specs in the run's options; the server never runs them)."""
    return get_catalog().specs(run.options.get("tools", [])) + list(run.options.get("client_tools", []))


def _unique_calls(iteration: int, calls: list[ToolCall], used_ids: frozenset[str]) -> list[ToolCall]:
    """Models sometimes reuse or omit call ids; ids must be unique in a run."""
    used = set(used_ids)
    unique: list[ToolCall] = []
    for call in calls:
        call_id = call.id
        if not call_id or call_id in used:
            call_id = f"call_{iteration}_{len(unique)}_{secrets.token_hex(4)}"
        used.add(call_id)
        unique.append(ToolCall(id=call_id, name=call.name, arguments=call.arguments, metadata=call.metadata))
    return unique


def _record(turn: LlmTurn, result: TurnResult, provider_ms: int, turn_input: TurnInput) -> bool | None:
    """Write the finished turn; create and dispatch its tool calls, or, for
    an answer without tool calls, end the run (finalize) in the same
    transaction. Returns whether it asked for tools, or None if another
    delivery of the same turn recorded it first (the conditional update
    decides)."""
    run = turn.run
    calls = _unique_calls(turn.iteration, result.tool_calls, turn_input.used_call_ids) if turn.offered_tools else []
    now = timezone.now()
    values = {
        "status": "completed",
        "text": result.text,
        "reasoning": result.reasoning,
        "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments, **({"metadata": c.metadata} if c.metadata else {})}
            for c in calls
        ],
        "reasoning_details": result.reasoning_details,
        "finish_reason": "tool_calls" if calls else ("stop" if result.finish_reason == "tool_calls" else result.finish_reason),
        "usage": result.usage,
        "response_id": result.response_id or "",
        "provider_ms": provider_ms,
        "finished_at": now,
    }
    invocations = _invocations(run, turn, calls, turn_input, result, now)
    server_calls = [inv for inv in invocations if inv.status in (_PENDING, _AWAITING)]
    if not counts_tokens(run.user_id):  # no usage counter to write with the record
        if not calls:
            # The answer: recorded in finalize's transaction, in the round
            # trip that locks the run (finalize.py).
            recording = update_statement(LlmTurn, values, pk=turn.pk, status="running", deliveries=turn.deliveries)
            return False if run_finalize(run_id=str(run.id), outcome=Outcome.COMPLETED, recording=recording) else None
        if server_calls and connection.vendor == "postgresql":
            # Nothing else to commit with these rows: one statement (turn_record.py).
            if not record_turn_with_calls(turn, values, invocations, pending=len(server_calls), now=now):
                return None
            _send_round(run, invocations)
            return True
    with transaction.atomic():
        if not update_where(LlmTurn, values, pk=turn.pk, status="running", deliveries=turn.deliveries):
            return None
        count_tokens(run.user_id, result.usage)  # against a token budget, if the user has one
        if invocations:
            insert_rows(invocations)
            _send_round(run, invocations)
            if server_calls:
                # The round's fan-in counts down from here (tool_steps.py).
                update_where(Run, {"heartbeat_at": now, "pending_tool_calls": len(server_calls)}, pk=run.pk)
            else:
                # Only the client's tools were called: the run ends here, and
                # the client's next request carries their results.
                run_finalize(run_id=str(run.id), outcome=Outcome.COMPLETED)
        else:
            # The answer: the run ends in the same transaction (one commit,
            # no heartbeat write for a run that is ending).
            run_finalize(run_id=str(run.id), outcome=Outcome.COMPLETED)
    return bool(calls)


def _invocations(run: Run, turn: LlmTurn, calls: list[ToolCall], turn_input: TurnInput, result: TurnResult,
                 now) -> list[ToolInvocation]:
    """The turn's calls as new rows, each in the state it starts in."""
    if not calls:
        return []
    status_of = _initial_status(run)
    invocations = []
    for position, call in enumerate(calls):
        status = status_of(call.name)
        invocations.append(ToolInvocation(
            run=run,
            tool_call_id=call.id,
            iteration=turn.iteration,
            position=position,
            name=call.name,
            arguments=call.arguments,
            text_offset=turn_input.prior_text_length + len(result.text),
            status=status,
            approval_expires_at=approval_deadline(now) if status == _AWAITING else None,
        ))
    return invocations


def _send_round(run: Run, invocations: list[ToolInvocation]) -> None:
    """The round's calls to clients, and the ones that may run now to the
    tools queue (one awaiting approval is sent once approved)."""
    emit_tool_call_events(run, invocations)
    announce_requests(run, invocations)
    dispatch.tool_calls(run, [(inv.tool_call_id, inv.name, inv.position)
                              for inv in invocations if inv.status == _PENDING])


_PENDING, _AWAITING = ToolInvocation.Status.PENDING, ToolInvocation.Status.AWAITING_APPROVAL


def _initial_status(run: Run):
    """The state each new call of ``run`` starts in: the client's tools are
    the client's to run (never enqueued); tools that ask first wait for a
    decision (approvals.py), unless the run cannot ask (/v1: its step
    answers with an error); the rest are enqueued at once."""
    client_tools = client_tool_names(run)
    asking = set() if run.options.get(APPROVAL_MODE) == UNATTENDED_DENY else set(run.options.get(APPROVAL_TOOLS, ()))

    def status_of(name: str) -> str:
        if name in client_tools:
            return ToolInvocation.Status.CLIENT
        return _AWAITING if name in asking else _PENDING

    return status_of


def _after_done(turn: LlmTurn) -> None:
    """A delivery of a turn that is already completed: re-emit and move on."""
    run = turn.run
    if turn.tool_calls:
        invocations = list(ToolInvocation.objects.filter(run=run, iteration=turn.iteration).order_by("position"))
        emit_tool_call_events(run, invocations)
        announce_requests(run, invocations)
        if all(inv.status == ToolInvocation.Status.CLIENT for inv in invocations):
            run_finalize(run_id=str(run.id), outcome=Outcome.COMPLETED)
    else:
        run_finalize(run_id=str(run.id), outcome=Outcome.COMPLETED)


def llm_turn_execute(*, run_id: str, iteration: int) -> None:
    started = time.perf_counter()
    turn = claim_turn(run_id, iteration)
    if turn is None:
        # Completed (re-emit and move on), a live delivery is running it, or
        # it waits behind another run (whose finalize sends it again).
        steps = LlmTurn.objects.select_related("run").filter(run_id=run_id, iteration=iteration)
        done = steps.filter(status="completed").first()
        if done is not None and not done.run.is_terminal:
            _after_done(done)
        dispatch.step_ended(turn_step_id(run_id, iteration), unless=steps.filter(status="running").exists)
        return
    bind_run(turn.run)  # its log lines name the conversation and user too
    record.redelivered("llm_turn", turn.deliveries)
    try:
        provider_s = _run_claimed_turn(turn)
        record.step_overhead("llm_turn", time.perf_counter() - started - provider_s)
    except (DatabaseError, events.EventLogUnavailable) as exc:
        logger.warning("run %s turn %s: infrastructure failure (%s); handing the turn back to be run again",
                       run_id, iteration, exc)
        try:
            release_turn(turn)
        except DatabaseError:
            logger.warning("run %s turn %s: could not hand the turn back; its lease will expire", run_id, iteration)
        raise
    finally:
        dispatch.step_ended(turn_step_id(run_id, iteration))


def _still_holds(turn: LlmTurn) -> bool:
    """Whether this delivery still holds the turn's claim: before it ends the
    run for a failure or a stop, which a delivery whose worker was declared
    lost (a partition that healed) must not do over its successor."""
    return LlmTurn.objects.filter(pk=turn.pk, status="running", deliveries=turn.deliveries).exists()


def _run_claimed_turn(turn: LlmTurn) -> float:
    """Run the claimed turn; returns the seconds spent in the model call
    (0 when none was made), the part of the step that is not ours."""
    run = turn.run
    run_id, iteration = str(run.id), turn.iteration
    if step_must_stop(run):
        return 0.0
    budget = token_budget(run.user_id)
    if budget is not None and budget.exhausted:
        record.token_budget_refused("turn")
        run_finalize(run_id=run_id, outcome=Outcome.FAILED,
                     error=f"{budget.message()} The run stopped before its next model turn.")
        return 0.0
    if turn.deliveries > settings.CHATFORGE_MAX_STEP_DELIVERIES:
        run_finalize(
            run_id=run_id,
            outcome=Outcome.FAILED,
            error=(
                f"The model step was started {turn.deliveries - 1} times without finishing "
                "(its workers kept stopping); the run was given up."
            ),
        )
        return 0.0
    needs_marking = run.status != Run.Status.RUNNING or run.iteration != iteration or turn.deliveries > 1
    if needs_marking and extras_of(turn).run_marked_running is None:  # not done by the claim (SQLite)
        mark_run_running(run, iteration)  # the fan-in already moved a running run here
    events.turn_started(ref(run), iteration=iteration, message_id=str(run.user_message_id),
                        first_delivery=iteration == 0 and turn.deliveries == 1)

    if iteration == 0 and run.options.get(ATTACHMENTS_OPTION):
        with step_lease(run_id, turn), cancel_watch.watching(run_id):
            problem = wait_for_attachments(run, should_stop=lambda: cancel_watch.should_stop(run_id))
        if problem is not None:
            run_finalize(run_id=run_id, outcome=Outcome.FAILED, error=problem)
            return 0.0
        run.refresh_from_db(fields=["status", "cancel_requested"])
        if step_must_stop(run):
            return 0.0
    turn_input = input_for_turn(run, iteration, offer_tools=turn.offered_tools)
    try:
        extras = extras_of(turn)
        resolved = resolve(run.model, user_id=run.user_id, user_ciphertexts=extras.user_ciphertexts,
                           rows=extras.route_rows)
    except DatabaseError:
        raise
    except Exception as exc:
        logger.exception("run %s: cannot set up model %s", run_id, run.model)
        run_finalize(run_id=run_id, outcome=Outcome.FAILED,
                     error=f"The model '{run.model}' cannot be used: {exc}")
        return 0.0
    request = _request(run, turn, resolved, turn_input)
    # The model call is a wait on the network: hold no database connection
    # through it, so a worker can stream far more turns than its pool has
    # connections (the heartbeat and the cancel checks borrow one briefly).
    release_connections()
    with step_lease(run_id, turn) as lease:
        with cancel_watch.watching(run_id), step_span("llm.call", **{
                "chatforge.run_id": run_id, "chatforge.iteration": iteration, "chatforge.model": run.model,
                "chatforge.provider": resolved.kind}):
            calling = time.perf_counter()
            streamed = _call_model(run, turn, resolved, request, lease)
            model_s = time.perf_counter() - calling  # retries and their waits included
        if streamed.taken_over:
            logger.warning("run %s turn %s: given to another delivery (this worker was declared lost while it "
                           "could not renew its liveness); stopping here without recording", run_id, iteration)
            return model_s
        if streamed.result is not None:
            # The answer is in hand: record it through a short outage rather than
            # hand the turn back, which would call the model again.
            retry_through_outage(
                lambda: _record(turn, streamed.result, streamed.provider_ms, turn_input),
                what=f"run {run_id} turn {iteration}: recording the answer")
            record.tokens(run.model, streamed.result.usage)
            return model_s
    if lease.lost() or not _still_holds(turn):
        logger.warning("run %s turn %s: given to another delivery; its failure or stop here is not recorded",
                       run_id, iteration)
        return model_s
    if streamed.failure is not None:
        logger.warning("run %s turn %s failed: %s", run_id, iteration, streamed.failure.message)
        run_finalize(run_id=run_id, outcome=Outcome.FAILED, error=streamed.failure.message,
                     error_kind=str(streamed.failure.kind), partial_text=streamed.partial_text)
    elif streamed.result is None:
        run_finalize(run_id=run_id, outcome=Outcome.CANCELLED, partial_text=streamed.partial_text)
    return model_s
