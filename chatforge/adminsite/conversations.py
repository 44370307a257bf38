"""Conversations, messages and runs in the admin: read-only traces.

Nothing here can be added or edited: these rows are the engine's record of
what happened. Superusers may delete finished things (a conversation, a run
or a message whose runs have all ended), mainly so that deleting a user
works; rows of a run still in progress are never deletable.

The tables grow without bound, so every list avoids per-row queries
(``list_select_related``, subquery counts), skips the second full-table
count (``show_full_result_count = False``), and looks a UUID typed in the
search box up by primary key instead of scanning text.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.db.models import (
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)
from django.db.models.fields.json import KT, KeyTextTransform
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from chatforge.conversations.models import Conversation, Message, Run, ToolInvocation
from chatforge.conversations.traces import build_run_trace, pretty_json_text, run_duration_ms

# Rows listed on a conversation's page; longer conversations link to the
# filtered message and run lists for the rest.
CONVERSATION_PAGE_ROWS = 200


class TraceAdmin(admin.ModelAdmin):
    """Read-only admin for the engine's records."""

    show_full_result_count = False
    # Whether the changelist offers "delete selected" (still superusers only).
    bulk_delete = False
    # UUID fields matched exactly when the search term is a UUID.
    uuid_search_fields: tuple[str, ...] = ("pk",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_superuser and (obj is None or self.is_settled(obj))

    def is_settled(self, obj: Any) -> bool:
        """Whether no run of ``obj`` is still in progress (workers would fail on missing rows)."""
        return True

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        if not self.bulk_delete:
            actions.pop("delete_selected", None)
        return actions

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        try:
            value = uuid.UUID(search_term.strip())
        except ValueError:
            return super().get_search_results(request, queryset, search_term)
        match = Q()
        for field in self.uuid_search_fields:
            match |= Q(**{field: value})
        return queryset.filter(match), False


def _admin_link(route: str, pk: Any, text: Any) -> str:
    return format_html('<a href="{}">{}</a>', reverse(f"admin:{route}", args=[pk]), text)


def _pre(text: str) -> str:
    return format_html('<pre class="cf-pre">{}</pre>', text) if text else "—"


def _format_ms(ms: int | None) -> str:
    if ms is None:
        return "—"
    return f"{ms} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"


def _shorten(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _active_runs(queryset: QuerySet[Run]) -> QuerySet[Run]:
    return queryset.exclude(status__in=Run.TERMINAL)


@admin.register(Conversation)
class ConversationAdmin(TraceAdmin):
    list_display = ["id", "title_shown", "user", "run_count", "created_at", "updated_at"]
    list_select_related = ["user"]
    search_fields = ["title", "user__username"]
    date_hierarchy = "created_at"
    fields = ["id", "title", "user_link", "created_at", "updated_at"]
    readonly_fields = fields
    change_form_template = "admin/conversations/conversation/change_form.html"

    # Whole conversations may be deleted in bulk (superusers; a conversation
    # with a run in progress blocks the deletion, as on its own page).
    bulk_delete = True

    def get_queryset(self, request: HttpRequest) -> QuerySet[Conversation]:
        runs = Run.objects.filter(conversation=OuterRef("pk")).order_by().values("conversation")
        count = runs.annotate(n=Count("id")).values("n")[:1]
        return super().get_queryset(request).annotate(
            run_total=Coalesce(Subquery(count, output_field=IntegerField()), 0)
        )

    def is_settled(self, obj: Conversation) -> bool:
        return not _active_runs(obj.runs.all()).exists()

    @admin.display(description="title", ordering="title")
    def title_shown(self, obj: Conversation) -> str:
        return obj.title or "(untitled)"

    @admin.display(description="runs", ordering="run_total")
    def run_count(self, obj: Conversation) -> int:
        return getattr(obj, "run_total", 0)

    @admin.display(description="user")
    def user_link(self, obj: Conversation) -> str:
        return _admin_link("auth_user_change", obj.user_id, obj.user)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        # An id that is not a UUID failed the queries below with a 500; the
        # admin's own lookup answers it as a conversation that does not exist.
        if self.get_object(request, unquote(object_id)) is None:
            return super().change_view(request, object_id, form_url, extra_context)
        # Who answered: each answer's model, and the assistant profile its
        # run used (``Run.options["assistant"]``), read with the rows.
        messages = (Message.objects.filter(conversation_id=object_id).order_by("-created_at", "-id")
                    .annotate(run_assistant=KeyTextTransform("assistant", "run__options")))
        runs = (Run.objects.filter(conversation_id=object_id).order_by("-created_at")
                .annotate(assistant_name=KT("options__assistant")))
        message_rows = list(messages[: CONVERSATION_PAGE_ROWS + 1])
        run_rows = list(runs[: CONVERSATION_PAGE_ROWS + 1])
        extra_context = {
            **(extra_context or {}),
            "conversation_messages": [
                {"message": m, "preview": _shorten(m.content, 300), "rounds": len(m.tool_rounds or [])}
                for m in reversed(message_rows[:CONVERSATION_PAGE_ROWS])
            ],
            "messages_truncated": len(message_rows) > CONVERSATION_PAGE_ROWS,
            "conversation_runs": [
                {"run": r, "duration": _format_ms(run_duration_ms(r))} for r in run_rows[:CONVERSATION_PAGE_ROWS]
            ],
            "runs_truncated": len(run_rows) > CONVERSATION_PAGE_ROWS,
            "page_rows": CONVERSATION_PAGE_ROWS,
        }
        return super().change_view(request, object_id, form_url, extra_context)


@admin.register(Message)
class MessageAdmin(TraceAdmin):
    list_display = ["id", "conversation_link", "role", "status", "model", "preview", "created_at"]
    list_filter = ["role", "status"]
    date_hierarchy = "created_at"
    search_fields = ["content", "conversation__title"]
    uuid_search_fields = ("pk", "conversation_id", "run_id")
    fieldsets = [
        (None, {"fields": ["id", "conversation_link", "run_link", "role", "status", "model", "created_at"]}),
        ("Content", {"fields": ["content_shown", "finish_reason", "reasoning_tokens"]}),
        ("Tool rounds and usage", {"fields": ["tool_rounds_shown", "usage_shown"]}),
    ]
    readonly_fields = [
        "id", "conversation_link", "run_link", "role", "status", "model", "created_at", "content_shown",
        "finish_reason", "reasoning_tokens", "tool_rounds_shown", "usage_shown",
    ]

    def is_settled(self, obj: Message) -> bool:
        # Deleting a user message deletes its run (and the run's rows).
        return not _active_runs(Run.objects.filter(user_message=obj)).exists()

    @admin.display(description="conversation")
    def conversation_link(self, obj: Message) -> str:
        return _admin_link("conversations_conversation_change", obj.conversation_id, obj.conversation_id)

    @admin.display(description="run")
    def run_link(self, obj: Message) -> str:
        return _admin_link("conversations_run_change", obj.run_id, obj.run_id) if obj.run_id else "—"

    @admin.display(description="content")
    def preview(self, obj: Message) -> str:
        return _shorten(obj.content)

    @admin.display(description="content")
    def content_shown(self, obj: Message) -> str:
        return _pre(obj.content)

    @admin.display(description="tool rounds")
    def tool_rounds_shown(self, obj: Message) -> str:
        return _pre(_json(obj.tool_rounds)) if obj.tool_rounds else "—"

    @admin.display(description="usage")
    def usage_shown(self, obj: Message) -> str:
        return _pre(_json(obj.usage)) if obj.usage else "—"


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@admin.register(Run)
class RunAdmin(TraceAdmin):
    list_display = ["id", "user", "status", "model", "turns", "tool_calls", "duration", "created_at"]
    list_filter = ["status", "model", "max_iterations_reached"]
    list_select_related = ["user"]
    date_hierarchy = "created_at"
    search_fields = ["user__username", "conversation__title"]
    uuid_search_fields = ("pk", "conversation_id")
    change_form_template = "admin/conversations/run/change_form.html"
    fieldsets = [
        (None, {"fields": ["id", "conversation_link", "user_link", "status", "model", "assistant", "error",
                           "error_kind", "finish_reason", "max_iterations_reached", "cancel_requested", "blocked_by_link",
                           "cached_calls"]}),
        ("Timing", {"fields": ["created_at", "started_at", "finished_at", "duration", "heartbeat_at"]}),
        ("Request", {"fields": ["user_message_shown", "options_shown", "usage_shown"]}),
    ]
    readonly_fields = [
        "id", "conversation_link", "user_link", "status", "model", "assistant", "error", "error_kind",
        "finish_reason", "max_iterations_reached", "cancel_requested", "blocked_by_link", "created_at", "started_at",
        "finished_at", "duration", "heartbeat_at", "user_message_shown", "options_shown", "usage_shown",
        "cached_calls",
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Run]:
        calls = (
            ToolInvocation.objects.filter(run=OuterRef("pk")).order_by().values("run")
            .annotate(n=Count("id")).values("n")[:1]
        )
        return super().get_queryset(request).annotate(
            call_total=Coalesce(Subquery(calls, output_field=IntegerField()), 0),
            elapsed=ExpressionWrapper(F("finished_at") - F("created_at"), output_field=DurationField()),
        )

    def is_settled(self, obj: Run) -> bool:
        return obj.is_terminal

    @admin.display(description="turns", ordering="iteration")
    def turns(self, obj: Run) -> int:
        return obj.iteration + 1

    @admin.display(description="tool calls", ordering="call_total")
    def tool_calls(self, obj: Run) -> int:
        return getattr(obj, "call_total", 0)

    @admin.display(description="duration", ordering="elapsed")
    def duration(self, obj: Run) -> str:
        return _format_ms(run_duration_ms(obj))

    @admin.display(description="served from the cache")
    def cached_calls(self, obj: Run) -> str:
        """The run's calls answered from the tool result cache (their tool did
        not run: docs/tools.md, "Caching"), each a link to its call in the
        trace below; one query, on the run's page only."""
        calls = list(ToolInvocation.objects.filter(run=obj, result__cached=True)
                     .order_by("iteration", "position", "id").values_list("tool_call_id", "name"))
        if not calls:
            return "—"
        links = format_html_join(", ", '<a href="#call-{0}">{1}</a> (<code>{0}</code>)', calls)
        return format_html("{} of the run's calls: {}", len(calls), links)

    @admin.display(description="conversation")
    def conversation_link(self, obj: Run) -> str:
        return _admin_link("conversations_conversation_change", obj.conversation_id, obj.conversation_id)

    @admin.display(description="user")
    def user_link(self, obj: Run) -> str:
        return _admin_link("auth_user_change", obj.user_id, obj.user)

    @admin.display(description="assistant")
    def assistant(self, obj: Run) -> str:
        return (obj.options or {}).get("assistant") or "—"

    @admin.display(description="waited for run")
    def blocked_by_link(self, obj: Run) -> str:
        if obj.blocked_by_id is None:
            return "—"
        return _admin_link("conversations_run_change", obj.blocked_by_id, obj.blocked_by_id)

    @admin.display(description="user message")
    def user_message_shown(self, obj: Run) -> str:
        content = Message.objects.filter(pk=obj.user_message_id).values_list("content", flat=True).first()
        return _pre(content or "")

    @admin.display(description="options")
    def options_shown(self, obj: Run) -> str:
        # The assistant's system prompt is in the options; it is shown like the rest.
        return _pre(_json(obj.options)) if obj.options else "—"

    @admin.display(description="usage")
    def usage_shown(self, obj: Run) -> str:
        return _pre(_json(obj.usage)) if obj.usage else "—"

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        run = self.get_object(request, object_id)
        if run is not None:
            answer = Message.objects.filter(run=run, role=Message.Role.ASSISTANT).first()
            extra_context = {
                **(extra_context or {}),
                "trace": build_run_trace(run),
                "answer": answer,
                "answer_text": pretty_json_text(answer.content) if answer else "",
            }
        return super().change_view(request, object_id, form_url, extra_context)
