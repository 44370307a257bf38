"""Enqueueing steps. Always after the surrounding transaction commits, so a
worker never picks up a step whose rows it cannot see yet.

Postgres is the outbox: a step is a row (written in the transaction that
decided it) before its message is sent. When sending fails — the broker is
unreachable — nothing is lost and the caller is not failed: the run's
heartbeat is cleared, which the stalled-run sweeper takes as "send this
run's next step again", and its next pass after the broker is back does so
(steps are idempotent, so a message that did get through twice is harmless).

Fair scheduling (``scheduling/slots.py``): a step is admitted before it is
sent. A step whose user, assistant or tool is at its cap of running steps
is parked instead — nothing is sent, no worker is held — and is sent when a
step of that scope ends (``step_ended``) or the sweeper finds room
(``send_parked``).

Tasks are sent by name, so the services that decide on a step never import
the task module (no import cycle between tasks and services).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone
from kombu import Producer

from chatforge.catalog.catalog import get_catalog
from chatforge.celery import app
from chatforge.conversations.models import Run
from chatforge.observability import record
from chatforge.observability.tracing import in_run_trace, tracing_enabled
from chatforge.scheduling.limits import current_limits
from chatforge.scheduling.slots import Admitted, StepSlot, call_slot, scheduler, turn_slot

logger = logging.getLogger(__name__)

LLM_TURN = "chatforge.llm_turn"
TOOL_CALL = "chatforge.tool_call"
TOOL_CALL_IO = "chatforge.tool_call_io"
TOOL_CALL_SANDBOX = "chatforge.tool_call_sandbox"
FINALIZE_RUN = "chatforge.finalize_run"


def _mark_for_redispatch(run_id: str) -> None:
    try:
        Run.objects.filter(pk=run_id, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]).update(heartbeat_at=None)
    except DatabaseError:
        # The database is out too: the run's heartbeat goes stale on its own,
        # and the sweeper re-sends its step after CHATFORGE_RUN_STALL_S.
        logger.exception("run %s: could not mark it for re-sending", run_id)


@dataclass(frozen=True)
class Step:
    """A step to send: its task, the task's arguments, its slot in the
    scheduler and its place in its round."""

    task: str
    args: list
    slot: StepSlot
    position: int = 0


def _send(run_id: str, messages: list[tuple[str, list]], trace_parent: str) -> None:
    """Send a run's steps. Several (a round of parallel tool calls) go to
    the broker in one round trip: kombu's publish batch, one pipeline of
    their LPUSHes, where each ``send_task`` would wait for its own reply
    before the next call's message left (docs/performance.md)."""
    if not messages:
        return
    try:
        with in_run_trace(trace_parent), _one_round_trip(len(messages)) as producer:
            for task, args in messages:
                app.send_task(task, args=args, producer=producer)
    except Exception as exc:  # kombu OperationalError, redis errors: the broker is unreachable
        logger.warning("run %s: enqueueing %s failed (%s: %s); the sweeper will send it again",
                       run_id, ", ".join(task for task, _ in messages), type(exc).__name__, exc)
        _mark_for_redispatch(run_id)


@contextmanager
def _one_round_trip(messages: int) -> Iterator[Producer | None]:
    """The producer to send ``messages`` with: none for one (``send_task``
    takes one from the pool and publishes at once, with Celery's retry
    policy), a batching one for several, flushed when the block ends (a
    failure there raises, and the run is marked for re-sending as for any
    failed send; steps are idempotent, so a message that did get through
    twice is harmless)."""
    if messages == 1:
        yield None
        return
    with app.producer_or_acquire() as producer, producer.batch():
        yield producer


def _place(run: Run, position: int) -> int:
    """A step's place in a line: its run's creation time (ms), then its
    position in its round — older runs' steps go first, so runs under way
    finish rather than every run starting. An integer below 2**53: exact
    as a Redis score."""
    return int(run.created_at.timestamp() * 1000) * 1000 + min(position, 999)


def _admit_and_send_after_commit(run: Run, steps: list[Step]) -> None:
    """Once the transaction commits: admit each step (parked ones wait for
    a slot) and send the admitted ones."""
    if not steps:
        return
    run_id = str(run.pk)

    def send() -> None:
        admitted: list[Step] = []
        for step in steps:
            try:
                if scheduler().admit(step.slot, run_id=run_id, task=step.task, args=step.args,
                                     place=_place(run, step.position)):
                    admitted.append(step)
                    continue
            except Exception as exc:  # Redis unreachable: the same as a broker outage
                logger.warning("run %s: admitting %s failed (%s: %s); the sweeper will send it again",
                               run_id, step.task, type(exc).__name__, exc)
                _mark_for_redispatch(run_id)
                break  # those admitted hold their slots: they are sent
            record.step_parked(step.task)
            logger.info("run %s: %s waits for a free slot of %s", run_id, step.task,
                        ", ".join(scope for scope, _ in step.slot.scopes))
        _send(run_id, [(step.task, step.args) for step in admitted], run.trace_parent)

    transaction.on_commit(send)


def llm_turn(run: Run, iteration: int) -> None:
    run_id = str(run.pk)
    slot = turn_slot(run_id, iteration, user_id=run.user_id, assistant=run.options.get("assistant", ""))
    _admit_and_send_after_commit(run, [Step(LLM_TURN, [run_id, iteration], slot)])


def tool_call_task(tool_name: str) -> str:
    """The task (and so the queue) for a call of ``tool_name``: the I/O
    pool's when the tool's policy asks for it, else the prefork pool's.
    Both run the same step, so a call sent by a catalog a moment out of
    date still runs correctly, only on the other pool (decision 0025).
    A sandboxed tool's calls go to the sandbox worker, always: no other
    worker may run them (docs/sandbox.md)."""
    tool = get_catalog().get(tool_name)
    if tool is not None and tool.policy.sandboxed:
        return TOOL_CALL_SANDBOX
    if not settings.CHATFORGE_TOOLS_IO_POOL:
        return TOOL_CALL  # no tools_io worker in this deployment
    return TOOL_CALL_IO if tool is not None and tool.policy.pool == "io" else TOOL_CALL


def tool_calls(run: Run, calls: list[tuple[str, str, int]]) -> None:
    """Send a round's tool calls, each ``(tool_call_id, tool_name, position)``."""
    run_id, assistant = str(run.pk), run.options.get("assistant", "")
    _admit_and_send_after_commit(run, [
        Step(tool_call_task(name), [run_id, call_id],
             call_slot(run_id, call_id, user_id=run.user_id, assistant=assistant, tool_name=name),
             position + 1)
        for call_id, name, position in calls
    ])


def _send_admitted(admitted: list[Admitted]) -> None:
    if not admitted:
        return
    # Their runs' stall clock starts now: they waited in line, not stalled,
    # and the sweeper must not send them a second time.
    try:
        Run.objects.filter(pk__in={step.run_id for step in admitted},
                           status__in=[Run.Status.QUEUED, Run.Status.RUNNING]).update(heartbeat_at=timezone.now())
    except DatabaseError:
        logger.warning("could not touch the runs of %d steps leaving the line", len(admitted))
    trace_parents = _trace_parents({step.run_id for step in admitted})
    for step in admitted:
        _send(step.run_id, [(step.task, step.args)], trace_parents.get(step.run_id, ""))


def _trace_parents(run_ids: set[str]) -> dict[str, str]:
    """The runs' stored traceparents (asked only when tracing is on)."""
    if not tracing_enabled():
        return {}
    try:
        return {str(pk): parent for pk, parent in Run.objects.filter(pk__in=run_ids).values_list("pk", "trace_parent")}
    except DatabaseError:
        return {}  # sent all the same, each in a trace of its own


def step_ended(step_id: str, *, unless: Callable[[], bool] | None = None) -> None:
    """A step's task is done with it: its slots go back, and the parked
    steps that now fit are sent. ``unless``: asked (only when caps are set)
    whether another delivery still runs the step, which then keeps them.
    Never fails the step: if Redis cannot be reached the slots' leases lapse
    and the sweeper's pass sends what waits."""
    if not current_limits().caps_running_steps:
        return  # no caps: no step holds a slot (parked ones are sent by the sweeper's pass)
    if unless is not None and unless():
        return
    try:
        admitted = scheduler().release(step_id)
        _send_admitted(admitted)
        record.steps_unparked("step_end", len(admitted))
    except Exception as exc:
        logger.warning("giving back the slots of %s failed (%s: %s); their leases will lapse",
                       step_id, type(exc).__name__, exc)


def send_parked() -> int:
    """The sweeper's pass: send parked steps that fit now (slots whose
    lease lapsed: their worker died). Returns how many were sent."""
    admitted = scheduler().wake()
    _send_admitted(admitted)
    record.steps_unparked("sweeper", len(admitted))
    return len(admitted)
