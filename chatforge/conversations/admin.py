"""Read-only traces of conversations and runs (the full admin comes later)."""

from django.contrib import admin

from .models import Conversation, LlmTurn, Message, Run, ToolInvocation


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdmin):
    list_display = ["id", "title", "user", "updated_at"]
    search_fields = ["title", "user__username"]


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ["id", "conversation", "role", "status", "created_at"]
    list_filter = ["role", "status"]


class LlmTurnInline(admin.TabularInline):
    model = LlmTurn
    extra = 0
    can_delete = False
    fields = ["iteration", "status", "offered_tools", "text", "tool_calls", "finish_reason", "deliveries", "started_at", "finished_at"]
    readonly_fields = fields


class ToolInvocationInline(admin.TabularInline):
    model = ToolInvocation
    extra = 0
    can_delete = False
    fields = ["iteration", "position", "name", "arguments", "status", "output", "attempts", "deliveries", "duration_ms"]
    readonly_fields = fields


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ["id", "user", "model", "status", "iteration", "created_at", "finished_at"]
    list_filter = ["status", "model"]
    search_fields = ["id", "user__username"]
    inlines = [LlmTurnInline, ToolInvocationInline]
