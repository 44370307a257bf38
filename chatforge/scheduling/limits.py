"""The limits in force, read from the admin's tables and cached per process.

Every dispatch asks which caps a step falls under; asking the database each
time would add statements to every step. The three small tables are read
together at most once per CHATFORGE_LIMITS_TTL_S per process instead, so an
admin's edit reaches the whole fleet within that time.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from functools import cached_property

from django.conf import settings

from chatforge.catalog.models import Assistant

from .models import ToolLimit, UserLimits


@dataclass(frozen=True)
class UserLimit:
    max_running_steps: int | None = None  # None: the server default
    token_budget: int | None = None
    token_budget_period: str = "day"


@dataclass(frozen=True)
class ToolLimitValues:
    max_concurrency: int | None = None
    daily_quota_per_user: int | None = None


@dataclass(frozen=True)
class Limits:
    users: dict[int, UserLimit] = field(default_factory=dict)
    assistants: dict[str, int] = field(default_factory=dict)  # name → max running steps
    tools: dict[str, ToolLimitValues] = field(default_factory=dict)

    def user(self, user_id: int) -> UserLimit:
        return self.users.get(user_id, _NO_USER_LIMIT)

    def user_running_cap(self, user_id: int) -> int:
        """0: no cap."""
        override = self.user(user_id).max_running_steps
        return settings.CHATFORGE_USER_MAX_RUNNING_STEPS if override is None else override

    def tool(self, name: str) -> ToolLimitValues:
        return self.tools.get(name, _NO_TOOL_LIMIT)

    @property
    def caps_running_steps(self) -> bool:
        """Whether any cap on running steps is set: when none is, steps
        skip the scheduler altogether (no Redis round trip per step)."""
        return settings.CHATFORGE_USER_MAX_RUNNING_STEPS > 0 or self._tables_cap_running_steps

    @cached_property
    def _tables_cap_running_steps(self) -> bool:
        """Whether a row of the admin's tables sets such a cap: looked up
        once per snapshot, not on every step (a scan of every user's limits:
        1.2 % of the tools worker's CPU at the benchmark's saturation)."""
        return (any(u.max_running_steps for u in self.users.values())
                or any(cap > 0 for cap in self.assistants.values())
                or any(t.max_concurrency for t in self.tools.values()))


_NO_USER_LIMIT = UserLimit()
_NO_TOOL_LIMIT = ToolLimitValues()

# Held by the one caller refreshing an expired snapshot, never waited on:
# the others use the previous snapshot meanwhile. A caller waiting for the
# lock could hold a pooled database connection (a step ends with its
# connection still checked out) while the refresher waits for one from the
# same pool: with every connection held that way, the process stalled until
# the pool's timeout (seen at saturation in the gevent LLM worker).
_refreshing = threading.Lock()
_cached: tuple[float, Limits] | None = None


def _load() -> Limits:
    return Limits(
        users={
            row.user_id: UserLimit(row.max_running_steps, row.token_budget, row.token_budget_period)
            for row in UserLimits.objects.all()
        },
        assistants=dict(
            Assistant.objects.filter(max_running_steps__isnull=False).values_list("name", "max_running_steps")
        ),
        tools={
            row.tool_name: ToolLimitValues(row.max_concurrency, row.daily_quota_per_user)
            for row in ToolLimit.objects.all()
        },
    )


def current_limits(*, fresh: bool = False) -> Limits:
    """The limits as of at most CHATFORGE_LIMITS_TTL_S ago (``fresh``: now)."""
    global _cached
    now = time.monotonic()
    cached = _cached
    if not fresh and cached is not None and now - cached[0] < settings.CHATFORGE_LIMITS_TTL_S:
        return cached[1]
    refreshing = not fresh and cached is not None
    if refreshing and not _refreshing.acquire(blocking=False):
        return cached[1]  # another caller is reading the new snapshot
    try:
        limits = _load()
        _cached = (now, limits)
    finally:
        if refreshing:
            _refreshing.release()
    return limits


def forget_cached_limits() -> None:
    """Tests and admin saves: the next read goes to the database."""
    global _cached
    _cached = None
