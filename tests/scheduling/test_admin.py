"""Limits are set in the admin: a tool limit must name a real tool, and an
edit takes effect for the next step dispatched once the cache is renewed."""

from __future__ import annotations

import pytest

from chatforge.scheduling.limits import current_limits, forget_cached_limits
from chatforge.scheduling.models import ToolLimit, UserLimits

pytestmark = pytest.mark.django_db


def test_a_tool_limit_must_name_a_known_tool(admin_client):
    response = admin_client.post("/admin/scheduling/toollimit/add/",
                                 {"tool_name": "no_such_tool", "max_concurrency": "2"})
    assert response.status_code == 200
    assert "No tool is called &#x27;no_such_tool&#x27;" in response.content.decode()
    assert not ToolLimit.objects.exists()
    response = admin_client.post("/admin/scheduling/toollimit/add/",
                                 {"tool_name": "calculator", "max_concurrency": "2", "daily_quota_per_user": "50"})
    assert response.status_code == 302
    assert ToolLimit.objects.get(tool_name="calculator").daily_quota_per_user == 50


def test_user_limits_from_the_admin_reach_the_engine(admin_client, django_user_model, settings):
    settings.CHATFORGE_USER_MAX_RUNNING_STEPS = 8
    user = django_user_model.objects.create_user(username="heavy", password="pw")
    forget_cached_limits()
    assert current_limits().user_running_cap(user.pk) == 8  # the server default
    response = admin_client.post("/admin/scheduling/userlimits/add/", {
        "user": user.pk, "max_running_steps": "2", "token_budget": "", "token_budget_period": "day"})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert UserLimits.objects.get(user=user).max_running_steps == 2
    assert current_limits(fresh=True).user_running_cap(user.pk) == 2


def test_whether_any_cap_is_set_follows_the_tables_per_snapshot_and_the_default_live(django_user_model, settings):
    settings.CHATFORGE_USER_MAX_RUNNING_STEPS = 0
    user = django_user_model.objects.create_user(username="capped", password="pw")
    UserLimits.objects.create(user=user, max_running_steps=None)  # a row without a cap
    limits = current_limits(fresh=True)
    assert not limits.caps_running_steps
    settings.CHATFORGE_USER_MAX_RUNNING_STEPS = 4  # the server default is read at each step
    assert limits.caps_running_steps
    settings.CHATFORGE_USER_MAX_RUNNING_STEPS = 0
    ToolLimit.objects.create(tool_name="echo", max_concurrency=2)
    assert not limits.caps_running_steps  # a snapshot keeps its tables
    assert current_limits(fresh=True).caps_running_steps  # the next one sees the row
