"""Per-user tool quotas and token budgets, counted in the database.

A quota check and its count are one statement: an upsert of the day's
counter that only adds while the count is below the quota and returns the
new count — no row back means the quota was already used up. Postgres (and
SQLite in embedded mode) evaluate it atomically, so concurrent calls on any
number of hosts never exceed the quota nor lose a count.

Token usage is counted per user per day (UTC) for users with a budget
(admin: user limits), after each model turn; a budget per week or month
sums its days. A turn in flight when the budget runs out finishes: the
check is made before each turn starts and when a message is posted.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from django.db import connection
from django.db.models import Sum
from django.utils import timezone

from chatforge.db.sql_rows import fixed_sql_cursor
from chatforge.scheduling.limits import current_limits
from chatforge.scheduling.models import UsageCounter, next_period_start, period_start

_TABLE = UsageCounter._meta.db_table

# Add ``amount`` to the user's counter of ``kind`` for ``day``; with a
# ceiling, only while the count is below it (no row back: refused).
_COUNT_SQL = f"""
INSERT INTO {_TABLE} (user_id, kind, day, used) VALUES (%s, %s, %s, %s)
ON CONFLICT (user_id, kind, day) DO UPDATE SET used = {_TABLE}.used + excluded.used
{{ceiling}}
RETURNING used
"""


def _today() -> datetime.date:
    return timezone.now().astimezone(datetime.UTC).date()


def _count(user_id: int, kind: str, amount: int, *, below: int | None = None) -> int | None:
    """The counter after adding ``amount``; None when ``below`` was reached."""
    day = _today()
    ceiling = f"WHERE {_TABLE}.used < %s" if below is not None else ""
    params: list = [user_id, kind, connection.ops.adapt_datefield_value(day), amount]
    if below is not None:
        if below <= 0:
            return None
        params.append(below)
    with fixed_sql_cursor() as cursor:
        cursor.execute(_COUNT_SQL.format(ceiling=ceiling), params)
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def _renews_in(next_start: datetime.date) -> tuple[str, int]:
    """(when, seconds until then) for a message and Retry-After."""
    at = datetime.datetime.combine(next_start, datetime.time(), tzinfo=datetime.UTC)
    seconds = max(1, int((at - timezone.now()).total_seconds()))
    hours, rest = divmod(seconds, 3600)
    return f"{at:%Y-%m-%d %H:%M} UTC (in {hours} h {rest // 60} min)", seconds


def take_tool_call(user_id: int, tool_name: str) -> str | None:
    """Count one call of ``tool_name`` against the user's daily quota; None
    when it may run (or has no quota), else the message for the model."""
    quota = current_limits().tool(tool_name).daily_quota_per_user
    if quota is None:
        return None
    if _count(user_id, UsageCounter.tool_kind(tool_name), 1, below=quota) is not None:
        return None
    when, _ = _renews_in(_today() + datetime.timedelta(days=1))
    return (f"Error: the daily quota of tool '{tool_name}' ({quota} calls per user per day) is used "
            f"up; it renews at {when}. Do not call '{tool_name}' again today: answer with the "
            "results you already have, or say that this tool cannot be used until then.")


@dataclass(frozen=True)
class BudgetState:
    budget: int
    used: int
    period: str
    renews: str
    retry_after_s: int

    @property
    def exhausted(self) -> bool:
        return self.used >= self.budget

    def message(self) -> str:
        return (f"The token budget of {self.budget} tokens per {self.period} is used up ({self.used} used); "
                f"it renews at {self.renews}.")


def token_budget(user_id: int) -> BudgetState | None:
    """The user's budget and what the current period used; None: no budget."""
    limit = current_limits().user(user_id)
    if limit.token_budget is None:
        return None
    today = _today()
    used = UsageCounter.objects.filter(
        user_id=user_id, kind=UsageCounter.TOKENS, day__gte=period_start(limit.token_budget_period, today),
    ).aggregate(total=Sum("used"))["total"] or 0
    renews, seconds = _renews_in(next_period_start(limit.token_budget_period, today))
    return BudgetState(budget=limit.token_budget, used=int(used), period=limit.token_budget_period,
                       renews=renews, retry_after_s=seconds)


def counts_tokens(user_id: int) -> bool:
    """Whether the user's turns are counted against a token budget."""
    return current_limits().user(user_id).token_budget is not None


def count_tokens(user_id: int, usage: dict) -> None:
    """Add a turn's tokens to the user's day, for users with a budget."""
    if not counts_tokens(user_id):
        return
    total = usage.get("total_tokens") or (usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
    if total:
        _count(user_id, UsageCounter.TOKENS, int(total))
