"""A model turn that asks for tools: its answer, its calls and the run's
count of pending calls in one statement (Postgres).

Recording such a turn was a transaction: BEGIN, the conditional UPDATE of
the turn, the INSERT of its calls, the UPDATE of the run, COMMIT — five
round trips between the model's last chunk and the round's calls being
sent. Data-modifying CTEs of one statement commit together, in one
snapshot, so the same writes go as one statement in autocommit: each
call's INSERT and the run's UPDATE happen only if the turn's UPDATE
matched (a delivery whose turn another delivery recorded first changes
nothing, as before).

The transactional path (``llm_turns._record``) stays for what must commit
with more than these rows: an answer (finalize), a round of only the
client's tools (the run ends), a user with a token budget (the usage
counter), and SQLite.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from chatforge.conversations.models import LlmTurn, Run, ToolInvocation
from chatforge.db.sql_rows import db_param, fixed_sql_cursor, insert_select_statement, mark_saved, set_clause


def record_turn_with_calls(turn: LlmTurn, values: dict[str, Any], calls: list[ToolInvocation], *,
                           pending: int, now: datetime) -> bool:
    """Write ``values`` on ``turn`` if it is still running under this
    delivery (one whose turn was given to another records nothing), insert its
    ``calls`` (their primary keys are set) and set the run's pending count
    and heartbeat. Returns whether the turn was recorded here."""
    set_turn, params = set_clause(LlmTurn, values)
    parts = [f'recorded AS (UPDATE {LlmTurn._meta.db_table} SET {set_turn} '
             f'WHERE "id" = %s AND "status" = %s AND "deliveries" = %s RETURNING 1)']
    params += [turn.pk, "running", turn.deliveries]  # only the delivery holding the claim records
    for n, call in enumerate(calls):
        sql, call_params = insert_select_statement(call, {}, source="recorded")
        parts.append(f'c{n} AS ({sql} RETURNING "id")')
        params += call_params
    parts.append(f"pending AS (UPDATE {Run._meta.db_table} SET heartbeat_at = %s, pending_tool_calls = %s "
                 f"WHERE id = %s AND EXISTS (SELECT 1 FROM recorded))")
    params += [db_param(Run, "heartbeat_at", now), pending, db_param(Run, "pk", turn.run_id)]
    ids = "".join(f", (SELECT id FROM c{n})" for n in range(len(calls)))
    with fixed_sql_cursor() as cursor:
        cursor.execute(f"WITH {', '.join(parts)} SELECT (SELECT count(*) FROM recorded){ids}", params)
        recorded, *pks = cursor.fetchone()
    if not recorded:
        return False
    for call, pk in zip(calls, pks, strict=True):
        call.pk = pk
    mark_saved(calls)
    return True
