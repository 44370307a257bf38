"""A tool call's record, its count-off and the round's next turn in one
statement (Postgres).

Recording a call was a transaction of its own: BEGIN, the conditional
UPDATE of the call, the run's count-off, the next turn's INSERT when the
call was the round's last, COMMIT — four or five round trips, each paid on
the way from the tool's answer to the next model turn. Postgres runs
data-modifying CTEs of one statement atomically, in one snapshot, so the
same writes go as one statement in autocommit: one round trip and the
same guarantees.

- The count-off runs only if the call's UPDATE matched (a delivery whose
  call is no longer in ``from_status`` changes nothing, as before).
- The run row's UPDATE locks it until the statement commits, and a
  concurrent count-off of the same round waits for it and is evaluated
  against the row as that one left it (read committed), so exactly one
  call sees the count reach zero — the one whose statement also inserts
  the next turn.
- The next turn is inserted only in the case the transactional path
  inserts it: the last call, the run not asked to stop. A run with client
  tools (whose round may end with the client's calls rather than a turn)
  keeps the transactional path (``tool_steps.record_result``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chatforge.conversations.models import LlmTurn, Run, ToolInvocation
from chatforge.db.sql_rows import db_param, fixed_sql_cursor, insert_select_statement, set_clause

RUN = Run._meta.db_table
CALL = ToolInvocation._meta.db_table


# Counting a call off its round: SET expressions read the row as it was,
# so "pending_tool_calls <= 1" means "this call is the last", and the run
# moves to the next iteration with its last call unless asked to stop.
# RETURNING needs SQLite 3.35+ in embedded mode.
_COUNT_OFF = f"""
UPDATE {RUN}
SET pending_tool_calls = pending_tool_calls - 1,
    heartbeat_at = %s,
    iteration = CASE WHEN pending_tool_calls <= 1 AND NOT cancel_requested
                     THEN iteration + 1 ELSE iteration END
WHERE id = %s AND iteration = %s AND status IN ('queued', 'running'){{also}}
RETURNING pending_tool_calls, iteration, cancel_requested
"""


@dataclass(frozen=True)
class CountedOff:
    """The run after a call was counted off its round."""

    pending: int  # calls of the round still running
    iteration: int  # the run's iteration now (moved on when the round ended)
    cancel_requested: bool
    next_turn_created: bool = False  # by the same statement (one-statement path)


@dataclass(frozen=True)
class CallRecord:
    recorded: bool  # False: another delivery recorded the call first
    counted: CountedOff | None  # None: the run has ended or left the round


def _count_off_params(call: ToolInvocation, now: datetime) -> list:
    return [db_param(Run, "heartbeat_at", now), db_param(Run, "pk", uuid.UUID(str(call.run_id))), call.iteration]


def count_off(call: ToolInvocation, now: datetime) -> CountedOff | None:
    """Count a recorded call off its round, in the caller's transaction
    (the transactional path); None when the run has ended or is no longer
    at the call's round."""
    with fixed_sql_cursor() as cursor:
        cursor.execute(_COUNT_OFF.format(also=""), _count_off_params(call, now))
        row = cursor.fetchone()
    return None if row is None else CountedOff(int(row[0]), int(row[1]), bool(row[2]))


def record_call_and_count_off(call: ToolInvocation, values: dict[str, Any], *, from_status: str,
                              now: datetime, offer_tools_below: int) -> CallRecord:
    """In one statement: write ``values`` on ``call`` if it is still in
    ``from_status`` under this delivery (``deliveries``: a delivery whose
    call was given to another, its worker declared lost, records nothing), count it off its round and, if it was the last and the
    run goes on, insert the next turn (offered tools while its iteration
    is below ``offer_tools_below``)."""
    set_call, call_params = set_clause(ToolInvocation, values)
    turn_sql, turn_params = insert_select_statement(
        LlmTurn(run_id=call.run_id, iteration=0, offered_tools=False),
        {"iteration": ("c.iteration", []), "offered_tools": ("c.iteration < %s", [offer_tools_below])},
        source="counted c WHERE c.pending_tool_calls = 0 AND NOT c.cancel_requested",
    )
    sql = f"""
WITH recorded AS (
    UPDATE {CALL} SET {set_call} WHERE "id" = %s AND "status" = %s AND "deliveries" = %s RETURNING 1
), counted AS ({_COUNT_OFF.format(also=" AND EXISTS (SELECT 1 FROM recorded)")}), next_turn AS (
    {turn_sql}
    RETURNING 1
)
SELECT (SELECT count(*) FROM recorded), c.pending_tool_calls, c.iteration, c.cancel_requested,
       (SELECT count(*) FROM next_turn)
FROM (SELECT 1) AS one LEFT JOIN counted c ON true
"""
    params = [*call_params, call.pk, from_status, call.deliveries, *_count_off_params(call, now), *turn_params]
    with fixed_sql_cursor() as cursor:
        cursor.execute(sql, params)
        recorded, pending, iteration, cancel_requested, turned = cursor.fetchone()
    if pending is None:
        return CallRecord(recorded=bool(recorded), counted=None)
    return CallRecord(recorded=True, counted=CountedOff(int(pending), int(iteration), bool(cancel_requested),
                                                        bool(turned)))
