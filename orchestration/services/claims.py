"""Claiming a step for one delivery, in one statement.

``UPDATE … SET status='running', deliveries=deliveries+1, heartbeat_at=now
WHERE status='pending' OR (status='running' AND the lease expired)`` is
atomic on its own: it records the step as started (before any side effect),
counts deliveries and takes the lease. It matches nothing when the step is
completed, or when another delivery is running it right now (its lease is
fresh) — so duplicates are recognised without a transaction or a row lock
held across statements. ``deliveries > 1`` after a claim means an earlier
delivery started the step and died before finishing it.

On Postgres the claim also returns what the step needs (the step row, its
run and, for a turn, the user's message, and the tool catalog's version) in
the same round trip: the UPDATE
runs in a data-modifying CTE whose RETURNING rows are joined to the run.
SQLite (embedded mode) has no such CTE: there the claim is the UPDATE
followed by reads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Exists, F, Model, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from chatforge.accounts.models import UserSecret
from chatforge.catalog import versioning as catalog_versioning
from chatforge.conversations.models import LlmTurn, Message, Run, ToolInvocation
from chatforge.db.sql_rows import columns, fixed_sql_cursor, load_next, load_optional
from chatforge.llm.models import LanguageModel, Provider
from chatforge.llm.routing import RouteRows
from orchestration.queueing.worker_identity import current_worker_name

from .heartbeat import process_owner


@dataclass(frozen=True)
class ClaimExtras:
    """What the Postgres claim read in the same statement, so the step does
    not ask again; None where it was not read (SQLite): the step queries.

    ``user_ciphertexts``: the run's user's stored secrets, name → ciphertext
    (decrypted only where used: the user's own provider key, a tool's secret).
    ``earlier_arguments``: the arguments of this run's earlier calls of the
    same tool (the repeated-call check)."""

    user_ciphertexts: dict[str, str] | None = None
    earlier_arguments: list[str] | None = None
    # A turn's claim: whether it marked the run running (None: not asked,
    # the caller decides and calls mark_run_running).
    run_marked_running: bool | None = None
    # A turn's claim: the admin rows its run's model resolves to.
    route_rows: RouteRows | None = None


NOTHING_PRELOADED = ClaimExtras()


def extras_of(step: Model) -> ClaimExtras:
    return getattr(step, "claim_extras", NOTHING_PRELOADED)


def _claimable(now) -> Q:
    expired = now - timedelta(seconds=settings.CHATFORGE_RUN_STALL_S)
    lease_expired = Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=expired)
    return Q(status="pending") | (Q(status="running") & lease_expired)


def _claim_values(now) -> dict:
    return {
        "status": "running",
        "deliveries": F("deliveries") + 1,
        "started_at": Coalesce(F("started_at"), now),
        "heartbeat_at": now,
        "worker": current_worker_name(),
        "lease_owner": process_owner(),
    }


_ACTIVE = (Run.Status.QUEUED, Run.Status.RUNNING)


def claim_turn(run_id: str, iteration: int) -> LlmTurn | None:
    """The claimed turn (with its run and user message loaded), or None when
    it does not exist, is completed, is being run by a live delivery, or is
    a first turn still waiting behind another run of its conversation
    (double-texting: that run's finalize sends this turn again)."""
    if connection.vendor == "postgresql":
        return _claim_returning(LlmTurn, "iteration", iteration, run_id, with_message=True)
    now = timezone.now()
    unblocked = ~Exists(Run.objects.filter(pk=run_id, blocked_by__status__in=_ACTIVE)) if iteration == 0 else Q()
    claimed = LlmTurn.objects.filter(_claimable(now), unblocked, run_id=run_id, iteration=iteration).update(
        **_claim_values(now)
    )
    if not claimed:
        return None
    catalog_versioning.note_seen(catalog_versioning.current())
    return LlmTurn.objects.select_related("run", "run__user_message").get(run_id=run_id, iteration=iteration)


def claim_invocation(run_id: str, tool_call_id: str) -> ToolInvocation | None:
    """The claimed invocation (with its run loaded), or None when it does not
    exist, is finished, or is being run by a live delivery."""
    if connection.vendor == "postgresql":
        return _claim_returning(ToolInvocation, "tool_call_id", tool_call_id, run_id, with_message=False)
    now = timezone.now()
    claimed = ToolInvocation.objects.filter(_claimable(now), run_id=run_id, tool_call_id=tool_call_id).update(
        **_claim_values(now)
    )
    if not claimed:
        return None
    catalog_versioning.note_seen(catalog_versioning.current())
    return ToolInvocation.objects.select_related("run").get(run_id=run_id, tool_call_id=tool_call_id)


def _claim_returning(step_model, key_field: str, key, run_id: str, *, with_message: bool):
    """The Postgres claim: one statement that takes the lease and returns the
    step with its run, the user's secrets and, for a turn, the user's message
    (a tool call: its earlier calls of the same tool). A turn's claim also
    marks the run running at this iteration where it is not yet (what
    ``mark_run_running`` does), in a second CTE of the same statement."""
    now = timezone.now()
    expired = now - timedelta(seconds=settings.CHATFORGE_RUN_STALL_S)
    step_table, run_table = step_model._meta.db_table, Run._meta.db_table
    key_column = step_model._meta.get_field(key_field).column
    selected = [columns(step_model, "claimed"), columns(Run, "r")]
    joins = f'JOIN {run_table} r ON r."id" = claimed."run_id"'
    unblocked = marking = ""
    if with_message:
        selected.append(columns(Message, "m"))
        joins += f' JOIN {Message._meta.db_table} m ON m."id" = r."user_message_id"'
        if key == 0:  # a first turn waits while its run is blocked by an active one
            unblocked = f"""AND NOT EXISTS (SELECT 1 FROM {run_table} w JOIN {run_table} b ON b."id" = w."blocked_by_id"
                                             WHERE w."id" = %(run)s AND b."status" IN ('queued', 'running'))"""
        marking = f""", marked AS (
            UPDATE {run_table} SET "status" = 'running', "started_at" = COALESCE("started_at", %(now)s),
                                   "iteration" = %(key)s, "heartbeat_at" = %(now)s
            WHERE "id" = (SELECT "run_id" FROM claimed) AND "status" IN ('queued', 'running')
              AND ("status" <> 'running' OR "iteration" <> %(key)s OR (SELECT "deliveries" FROM claimed) > 1)
            RETURNING "id"
        )"""
        selected.append("(SELECT count(*) FROM marked)")
        # The admin rows the run's model resolves to (chatforge/llm/routing.py).
        model_table, provider_table = LanguageModel._meta.db_table, Provider._meta.db_table
        selected += [columns(LanguageModel, "lm"), columns(Provider, "lp"), columns(Provider, "pp")]
        joins += f"""
            LEFT JOIN ({model_table} lm JOIN {provider_table} lp ON lp."id" = lm."provider_id" AND lp."enabled")
                   ON lm."name" = r."model" AND lm."enabled"
            LEFT JOIN {provider_table} pp
                   ON pp."name" = split_part(r."model", '/', 1) AND strpos(r."model", '/') > 0 AND pp."enabled"
        """
    selected.append(f"""(SELECT COALESCE(json_object_agg(s."name", s."ciphertext")::text, '{{}}')
                         FROM {UserSecret._meta.db_table} s WHERE s."user_id" = r."user_id")""")
    if not with_message:
        selected.append(f"""(SELECT COALESCE(json_agg(e."arguments" ORDER BY e."iteration", e."position")::text, '[]')
                             FROM {step_table} e
                             WHERE e."run_id" = claimed."run_id" AND e."name" = claimed."name"
                               AND (e."iteration" < claimed."iteration"
                                    OR (e."iteration" = claimed."iteration" AND e."position" < claimed."position")))""")
    # The tool catalog's version (decision 0024): a worker whose catalog is
    # older rebuilds it before this step uses it.
    selected.append(f"""COALESCE((SELECT "value" FROM {catalog_versioning.table()} WHERE "id" = 1), 0)""")
    sql = f"""
        WITH claimed AS (
            UPDATE {step_table} SET
                "status" = 'running', "deliveries" = "deliveries" + 1,
                "started_at" = COALESCE("started_at", %(now)s), "heartbeat_at" = %(now)s,
                "worker" = %(worker)s, "lease_owner" = %(owner)s
            WHERE "run_id" = %(run)s AND "{key_column}" = %(key)s {unblocked} AND (
                "status" = 'pending'
                OR ("status" = 'running' AND ("heartbeat_at" IS NULL OR "heartbeat_at" < %(expired)s)))
            RETURNING *
        ){marking}
        SELECT {", ".join(selected)} FROM claimed {joins}
    """
    with fixed_sql_cursor() as cursor:
        cursor.execute(sql, {"now": now, "expired": expired, "run": run_id, "key": key,
                             "worker": current_worker_name(), "owner": process_owner()})
        row = cursor.fetchone()
    if row is None:
        return None
    values = iter(row)
    step = load_next(step_model, values)
    run = load_next(Run, values)
    marked = route = None
    if with_message:
        run.user_message = load_next(Message, values)
        marked = bool(next(values))
        model_row = load_optional(LanguageModel, values)
        model_provider = load_optional(Provider, values)
        prefix_provider = load_optional(Provider, values)
        if model_row is not None:
            model_row.provider = model_provider
        rest = run.model.partition("/")[2]
        route = RouteRows(model_row=model_row, prefix_provider=prefix_provider if model_row is None and rest else None)
        if marked:  # the row as the statement left it
            run.status, run.iteration, run.heartbeat_at = Run.Status.RUNNING, key, now
            run.started_at = run.started_at or now
    ciphertexts = json.loads(next(values))
    earlier_arguments = None if with_message else json.loads(next(values))
    catalog_versioning.note_seen(next(values))
    step.run = run
    step.claim_extras = ClaimExtras(
        user_ciphertexts=ciphertexts,
        earlier_arguments=earlier_arguments,
        run_marked_running=marked,
        route_rows=route,
    )
    return step


def mark_run_running(run: Run, iteration: int) -> None:
    """Status, start time, current iteration and heartbeat in one statement;
    never overwrites a terminal status."""
    now = timezone.now()
    Run.objects.filter(pk=run.pk, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]).update(
        status=Run.Status.RUNNING,
        started_at=Coalesce(F("started_at"), now),
        iteration=iteration,
        heartbeat_at=now,
    )


def release_turn(turn: LlmTurn) -> bool:
    """Hand a claimed turn back (pending, no lease) after an infrastructure
    failure — the event log or the database went away mid-turn — so the
    task's retry or the sweeper can run it at once instead of waiting for
    the lease to expire. The delivery is not counted: the worker did not
    die, and a model call is safe to repeat. Only the delivery holding the
    claim releases it (``status='running'`` and its own delivery count)."""
    return bool(
        LlmTurn.objects.filter(pk=turn.pk, status="running", deliveries=turn.deliveries).update(
            status="pending", heartbeat_at=None, deliveries=F("deliveries") - 1
        )
    )
