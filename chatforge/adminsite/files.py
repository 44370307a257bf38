"""Files in the admin: every user's stored files with their sizes and what
was read from them, each user's total, and the per-user storage limits
(docs/files.md, docs/admin.md).

Files are read-only here (their bytes and type are what was uploaded);
they can be deleted, one or several at once, and deleting a row deletes its
bytes from the files storage when the deletion commits
(``chatforge/files/signals.py``: Django's bulk delete sends the signal for
each row). File quotas are editable: a user without one may store
CHATFORGE_USER_FILE_BYTES.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin
from django.db.models import BigIntegerField, OuterRef, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.template.response import TemplateResponse

from chatforge.files.limits import human_size
from chatforge.files.models import FileQuota, StoredFile

# The most of a document's text its page shows.
TEXT_PREVIEW_CHARS = 2000


def _user_total(user_field: str = "user") -> Coalesce:
    """The bytes stored by the row's user, as a subquery (no query per row)."""
    totals = (StoredFile.objects.filter(user=OuterRef(user_field)).order_by().values("user")
              .annotate(total=Sum("size")).values("total"))
    return Coalesce(Subquery(totals, output_field=BigIntegerField()), 0)


@admin.register(StoredFile)
class StoredFileAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "conversation", "kind", "content_type", "size_shown", "user_total_shown",
                    "text_status", "source", "created_at"]
    list_filter = ["kind", "text_status", "source"]
    search_fields = ["name", "user__username", "user__email"]
    list_select_related = ["user", "conversation"]
    date_hierarchy = "created_at"
    show_full_result_count = False
    ordering = ["-created_at"]
    fields = ["id", "name", "user", "conversation", "message", "run", "tool_call_id", "source", "kind",
              "content_type", "size_shown", "sha256", "storage_name", "text_status", "text_error",
              "text_truncated", "text_preview", "created_at"]
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[StoredFile]:
        # The text can be megabytes: never read for a list.
        return super().get_queryset(request).defer("text").annotate(user_total=_user_total())

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # files arrive through the API, /v1 and tools

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # what was stored is what was uploaded

    @admin.display(description="size", ordering="size")
    def size_shown(self, file: StoredFile) -> str:
        return human_size(file.size)

    @admin.display(description="user's total", ordering="user_total")
    def user_total_shown(self, file: StoredFile) -> str:
        return human_size(getattr(file, "user_total", 0) or 0)

    @admin.display(description="text read (start)")
    def text_preview(self, file: StoredFile) -> str:
        text = StoredFile.objects.filter(pk=file.pk).values_list("text", flat=True).first() or ""
        if len(text) <= TEXT_PREVIEW_CHARS:
            return text or "—"
        return f"{text[:TEXT_PREVIEW_CHARS]}… ({len(text)} characters in all)"

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None):
        response = super().changelist_view(request, extra_context)
        if isinstance(response, TemplateResponse) and "cl" in (response.context_data or {}):
            # The files listed (the filters and search applied): their count and bytes, above the list.
            shown = response.context_data["cl"].queryset.order_by().aggregate(total=Sum("size"))["total"] or 0
            response.context_data["title"] = f"Files ({human_size(shown)} in the files listed)"
        return response


class FileQuotaForm(forms.ModelForm):
    class Meta:
        model = FileQuota
        fields = ["user", "max_bytes"]

    def clean_max_bytes(self) -> int:
        value = self.cleaned_data["max_bytes"]
        if value < 0:
            raise forms.ValidationError("A limit cannot be negative; 0 lets the user store nothing.")
        return value


@admin.register(FileQuota)
class FileQuotaAdmin(admin.ModelAdmin):
    form = FileQuotaForm
    list_display = ["user", "max_bytes_shown", "used_shown"]
    search_fields = ["user__username", "user__email"]
    list_select_related = ["user"]
    autocomplete_fields = ["user"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[FileQuota]:
        return super().get_queryset(request).annotate(used=_user_total())

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any):
        form = super().get_form(request, obj, change=change, **kwargs)
        form.base_fields["max_bytes"].help_text = (
            f"Bytes this user may keep stored, all files together. Without a quota, "
            f"{human_size(settings.CHATFORGE_USER_FILE_BYTES)} (CHATFORGE_USER_FILE_BYTES). "
            "Files already stored are kept when it is lowered; new ones are refused."
        )
        return form

    @admin.display(description="limit", ordering="max_bytes")
    def max_bytes_shown(self, quota: FileQuota) -> str:
        return human_size(quota.max_bytes)

    @admin.display(description="stored", ordering="used")
    def used_shown(self, quota: FileQuota) -> str:
        return human_size(getattr(quota, "used", 0) or 0)
