"""What the fleet allows each user, assistant and tool (docs/scheduling.md).

Caps on concurrently running steps are enforced across hosts in Redis
(``chatforge/scheduling/slots.py``); quotas and token budgets are counted
in Postgres (``UsageCounter``), one atomic statement per count. Every field
is optional: blank means "no limit" (or the server default, where one is
configured), so a deployment that sets nothing behaves as before.
"""

from __future__ import annotations

import datetime

from django.conf import settings
from django.db import models


class BudgetPeriod(models.TextChoices):
    DAY = "day", "Per day (UTC)"
    WEEK = "week", "Per week (Monday, UTC)"
    MONTH = "month", "Per calendar month (UTC)"


def period_start(period: str, today: datetime.date) -> datetime.date:
    """The first day of the budget period that contains ``today``."""
    if period == BudgetPeriod.WEEK:
        return today - datetime.timedelta(days=today.weekday())
    if period == BudgetPeriod.MONTH:
        return today.replace(day=1)
    return today


def next_period_start(period: str, today: datetime.date) -> datetime.date:
    """When the budget of the period containing ``today`` is renewed."""
    start = period_start(period, today)
    if period == BudgetPeriod.WEEK:
        return start + datetime.timedelta(days=7)
    if period == BudgetPeriod.MONTH:
        return (start + datetime.timedelta(days=32)).replace(day=1)
    return start + datetime.timedelta(days=1)


class UserLimits(models.Model):
    """One user's overrides of the server defaults."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="limits")
    max_running_steps = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="Model turns and tool calls of this user running at once across the whole fleet; "
                  "further steps wait in line without holding a worker. Blank: the server default "
                  "(CHATFORGE_USER_MAX_RUNNING_STEPS); 0: no cap.",
    )
    token_budget = models.PositiveBigIntegerField(
        null=True, blank=True,
        help_text="Model tokens (input + output) this user may use per period. Blank: no budget.",
    )
    token_budget_period = models.CharField(max_length=8, choices=BudgetPeriod.choices, default=BudgetPeriod.DAY)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "user limits"
        verbose_name_plural = "user limits"

    def __str__(self) -> str:
        return f"limits of {self.user}"


class ToolLimit(models.Model):
    """Limits of one tool by name: code tools, admin-defined tools and MCP tools alike."""

    tool_name = models.CharField(max_length=128, unique=True, help_text="The tool's name as the model sees it.")
    max_concurrency = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="Calls of this tool running at once across the fleet (all users). Blank: no cap.",
    )
    daily_quota_per_user = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="Calls each user may make per day (UTC); beyond it the model is told the quota is "
                  "used up instead of the tool running. Blank: no quota.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tool_name"]

    def __str__(self) -> str:
        return self.tool_name


class UsageCounter(models.Model):
    """What one user used of one kind of thing on one day (UTC): model tokens
    (``kind='tokens'``) or calls of a tool (``kind='tool:<name>'``).

    Counted by an atomic upsert (``chatforge/scheduling/usage.py``), so
    concurrent steps on any host never lose a count, and a quota check and
    its count are one statement."""

    TOKENS = "tokens"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="usage_counters")
    kind = models.CharField(max_length=140)
    day = models.DateField()
    used = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "kind", "day"], name="one_usage_counter_per_day")]
        ordering = ["-day", "user", "kind"]

    def __str__(self) -> str:
        return f"{self.user} {self.kind} {self.day}: {self.used}"

    @staticmethod
    def tool_kind(tool_name: str) -> str:
        return f"tool:{tool_name}"
