"""Sending on the steps of a lost worker process.

The liveness registry (``chatforge/workers/liveness.py``) says which worker
processes stopped renewing their liveness; the process elected to look
this interval (``heartbeat.py``) runs ``redrive_lost_workers``. For each
lost process, in this order:

1. It is declared lost in Redis, leaving a tombstone: should it come back
   (a partition that heals), its next renewal tells it to abandon what it
   claimed.
2. Its Postgres sessions are ended (they carry its name as
   ``application_name``): a session cut off inside a transaction holds row
   locks (its step's, its run's) that the re-drive below would wait for,
   until idle_in_transaction_session_timeout (60 s by default).
3. The leases of the steps it claimed (``lease_owner``, written by each
   claim) are released (``heartbeat_at`` cleared); each run's next step
   is then derived from the ledger and sent (``sweeper.run_redispatch``,
   which also tells the run's clients ``run.reconnecting``). Steps are claimed in
   one statement, so the new delivery runs the step exactly once; a tool
   with side effects that may have run is answered "interrupted" rather
   than run twice (``tool_steps.py``); and only the delivery holding a
   claim records (its ``deliveries``).
4. What it recorded but may not have announced is announced again: a
   process lost between its record's commit and the events it publishes
   after it would leave clients without that call's ``tool_output`` (or a
   turn's ``tool_call`` events) and its run without the step it was about
   to send. For the active runs it took part in, those events are
   published again (they are deduplicated: the log takes each once).
   Every run of steps 3 and 4 is re-driven once (a run with a live step is
   left alone).
5. The process is settled; a watcher that dies before this is followed by
   the next one, a few intervals later.

A process that is alive but slow (a 25 s tool, a long model turn) renews its
liveness from its own thread all along and is never declared lost.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from django.conf import settings
from django.db import DatabaseError, connection

from chatforge.conversations.models import LlmTurn, Run, ToolInvocation
from chatforge.observability import record
from chatforge.workers.liveness import LivenessRegistry
from orchestration.event_log import events

from .ledger import ref
from .llm_turns import emit_tool_call_events
from .sweeper import run_redispatch

logger = logging.getLogger(__name__)


def redrive_lost_workers(registry: LivenessRegistry) -> int:
    """One look for lost worker processes; the steps sent on."""
    # Right after Redis restarts every entry is old (or gone): wait until
    # each live process has renewed.
    if not registry.settled_for(settings.CHATFORGE_WORKER_LOST_S + 2 * settings.CHATFORGE_LIVENESS_S):
        return 0
    sent = 0
    for owner in registry.lapsed():
        if not registry.declare_lost(owner):
            continue  # it renewed meanwhile: alive
        ended = end_sessions_of(owner)
        released = release_steps_of(owner)
        runs = dict.fromkeys([*released, *announce_recorded_by(owner)])
        for run_id in runs:  # each run once, whichever way it came
            action = run_redispatch(run_id)
            logger.warning("run %s, of lost worker %s: %s", run_id, owner, action)
        count = len(released)
        logger.warning("worker process %s stopped renewing its liveness: declared lost; %d of its database "
                       "session(s) ended, %d step(s) it held sent on", owner, ended, count)
        record.worker_lost(count)
        registry.settle(owner)
        sent += count
    return sent


def end_sessions_of(owner: str) -> int:
    """End the lost process's Postgres sessions (releasing their locks);
    how many. Allowed for the sessions of one's own role; where the role may
    not, the locks wait for the server's idle-in-transaction timeout."""
    if connection.vendor != "postgresql":
        return 0
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                           "WHERE application_name = %s AND pid <> pg_backend_pid()", [owner])
            (ended,) = cursor.fetchone()
    except DatabaseError as exc:
        logger.warning("could not end the sessions of lost worker %s (%s); their locks last until "
                       "idle_in_transaction_session_timeout", owner, exc)
        return 0
    return int(ended)


def release_steps_of(owner: str) -> list[str]:
    """Release the leases of the steps the lost process was running: the run
    of each step released."""
    runs: list[str] = []
    for model in (LlmTurn, ToolInvocation):
        steps = model.objects.filter(lease_owner=owner, status="running")
        released = list(steps.values_list("pk", "run_id"))
        if released:
            model.objects.filter(pk__in=[pk for pk, _ in released], lease_owner=owner,
                                 status="running").update(heartbeat_at=None)
            runs += [str(run_id) for _, run_id in released]
    return runs


def announce_recorded_by(owner: str) -> list[str]:
    """Publish again what the lost process recorded for runs still active
    (step 4 above); those runs, to be re-driven too."""
    active = (Run.Status.QUEUED, Run.Status.RUNNING)
    unsettled = (ToolInvocation.Status.PENDING, ToolInvocation.Status.RUNNING,
                 ToolInvocation.Status.AWAITING_APPROVAL, ToolInvocation.Status.CLIENT)
    calls = (ToolInvocation.objects.filter(lease_owner=owner, run__status__in=active)
             .exclude(status__in=unsettled).select_related("run"))
    runs: dict[str, Run] = {}
    for call in calls:
        runs[str(call.run_id)] = call.run
        result = call.result or {}
        events.tool_output(ref(call.run), tool_call_id=call.tool_call_id, name=call.name, output=call.output,
                           status=call.status, execution_time_ms=call.duration_ms or 0, files=result.get("files"),
                           cached=bool(result.get("cached")))
    turns = list(LlmTurn.objects.filter(lease_owner=owner, status="completed", run__status__in=active)
                 .select_related("run"))
    rounds: dict[tuple[str, int], list[ToolInvocation]] = defaultdict(list)
    for inv in ToolInvocation.objects.filter(run_id__in={turn.run_id for turn in turns}).order_by("position"):
        rounds[(str(inv.run_id), inv.iteration)].append(inv)  # one query for every turn's calls
    for turn in turns:
        runs[str(turn.run_id)] = turn.run
        if invocations := rounds.get((str(turn.run_id), turn.iteration)):
            emit_tool_call_events(turn.run, invocations)
    return list(runs)
