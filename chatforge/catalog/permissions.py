"""Who may run a tool by hand (outside a run): one rule for the admin's
"Run with arguments" page and the API's ``POST /api/tools/{name}/invoke``.

Running a tool directly skips the model and the run's limits, and an HTTP
data tool may have effects outside (POST, DELETE) with the caller's secrets.
So viewing tools is not enough: it takes a staff account that may change
tool definitions, exactly what the admin asks before it shows the page.
"""

from __future__ import annotations

from typing import Any

RUN_TOOLS_PERMISSION = "catalog.change_tooldefinition"


def can_run_tools_by_hand(user: Any) -> bool:
    """True for an active staff user with the change permission on tools
    (superusers have every permission)."""
    return bool(
        getattr(user, "is_authenticated", False)
        and user.is_active
        and user.is_staff
        and user.has_perm(RUN_TOOLS_PERMISSION)
    )
