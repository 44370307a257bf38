"""Admin for fair scheduling: user limits, tool limits, and what was used.

Edits reach every web and worker process within CHATFORGE_LIMITS_TTL_S
(the limits are cached per process, ``chatforge/scheduling/limits.py``).
Usage counters are written by the engine only: the admin reads them.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from chatforge.catalog.catalog import get_catalog
from chatforge.scheduling.models import ToolLimit, UsageCounter, UserLimits


@admin.register(UserLimits)
class UserLimitsAdmin(admin.ModelAdmin):
    list_display = ["user", "max_running_steps", "token_budget", "token_budget_period", "updated_at"]
    search_fields = ["user__username", "user__email"]
    list_select_related = ["user"]
    autocomplete_fields = ["user"]
    readonly_fields = ["updated_at"]
    fieldsets = [
        (None, {"fields": ["user"]}),
        ("Running steps", {"fields": ["max_running_steps"]}),
        ("Token budget", {"fields": ["token_budget", "token_budget_period"],
                          "description": "When the budget is used up, new messages are refused with 429 "
                                         "and running runs end before their next model turn, with a "
                                         "message that says when the budget renews."}),
        ("History", {"fields": ["updated_at"], "classes": ["collapse"]}),
    ]


class ToolLimitForm(forms.ModelForm):
    class Meta:
        model = ToolLimit
        fields = ["tool_name", "max_concurrency", "daily_quota_per_user"]

    def clean_tool_name(self) -> str:
        """Limits of a tool nobody can call would silently do nothing: name a real one."""
        name = self.cleaned_data["tool_name"].strip()
        known = get_catalog(fresh=True).names()
        if name not in known:
            raise forms.ValidationError(
                f"No tool is called '{name}'. Known tools: {', '.join(sorted(known)) or 'none'}.")
        return name


@admin.register(ToolLimit)
class ToolLimitAdmin(admin.ModelAdmin):
    form = ToolLimitForm
    list_display = ["tool_name", "max_concurrency", "daily_quota_per_user", "updated_at"]
    search_fields = ["tool_name"]


@admin.register(UsageCounter)
class UsageCounterAdmin(admin.ModelAdmin):
    list_display = ["day", "user", "kind", "used"]
    list_filter = ["day", "kind"]
    search_fields = ["user__username", "kind"]
    list_select_related = ["user"]
    date_hierarchy = "day"
    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: UsageCounter | None = None) -> bool:
        return False
