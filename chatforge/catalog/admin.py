"""Admin for data tools and assistants; code tools are listed read-only."""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils.html import format_html

from tools.executor import execute_tool

from .catalog import get_catalog
from .models import Assistant, ToolDefinition


@admin.register(ToolDefinition)
class ToolDefinitionAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "enabled", "method", "url", "side_effects", "timeout_s", "max_attempts", "updated_at"]
    list_filter = ["kind", "enabled", "side_effects", "requires_approval"]
    search_fields = ["name", "description", "url"]
    list_editable = ["enabled"]
    actions = ["run_with_sample_arguments", "enable", "disable"]
    fieldsets = [
        (None, {"fields": ["name", "description", "kind", "enabled", "parameters"]}),
        ("Mock", {"fields": ["mock_response"]}),
        ("HTTP", {"fields": ["url", "method", "headers", "params_mapping", "response_path", "allowed_domains"]}),
        ("Policy", {"fields": ["timeout_s", "max_attempts", "backoff_initial_s", "backoff_max_s", "side_effects", "requires_approval"]}),
    ]

    @admin.action(description="Run with sample arguments (from the schema's examples/defaults)")
    def run_with_sample_arguments(self, request: HttpRequest, queryset) -> None:
        catalog = get_catalog(fresh=True)
        for defn in queryset:
            sample = _sample_arguments(defn.parameters)
            result = execute_tool(catalog, defn.name, sample)
            level = messages.SUCCESS if result.success else messages.WARNING
            self.message_user(
                request,
                format_html("{}({}) → {}", defn.name, json.dumps(sample), json.dumps(result.as_dict(), default=str)[:2000]),
                level,
            )

    @admin.action(description="Enable")
    def enable(self, request: HttpRequest, queryset) -> None:
        queryset.update(enabled=True)

    @admin.action(description="Disable")
    def disable(self, request: HttpRequest, queryset) -> None:
        queryset.update(enabled=False)


def _sample_arguments(schema: dict) -> dict:
    """Arguments from each property's first example, default or enum value."""
    sample = {}
    for name, prop in (schema.get("properties") or {}).items():
        if not isinstance(prop, dict):
            continue
        for key in ("examples", "default", "enum"):
            if key in prop:
                value = prop[key]
                sample[name] = value[0] if key in ("examples", "enum") and isinstance(value, list) and value else value
                break
    return sample


@admin.register(Assistant)
class AssistantAdmin(admin.ModelAdmin):
    list_display = ["name", "model", "tool_list", "max_iterations", "updated_at"]
    search_fields = ["name", "description", "system_prompt"]

    @admin.display(description="tools")
    def tool_list(self, obj: Assistant) -> str:
        return ", ".join(obj.tools or []) or "—"
