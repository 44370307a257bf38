"""Admin for providers (keys write-only, stored encrypted), models with their
validation status, and validation results (read-only)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Count, F, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from chatforge.accounts.crypto import encrypt
from chatforge.llm.models import LanguageModel, ModelValidation, Provider
from chatforge.llm.validation import VALIDATED_RATE, ValidationStatus


class ProviderForm(forms.ModelForm):
    api_key = forms.CharField(
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Write-only: stored encrypted, never shown. Leave blank to keep the current key.",
    )
    clear_api_key = forms.BooleanField(required=False, help_text="Remove the stored key (use the environment's).")

    class Meta:
        model = Provider
        fields = ["name", "kind", "base_url", "default_model", "enabled"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if cleaned.get("clear_api_key") and cleaned.get("api_key"):
            self.add_error("clear_api_key", "Either type a new key or remove the stored one, not both.")
        return cleaned

    def save(self, commit: bool = True) -> Provider:
        provider = super().save(commit=False)
        if self.cleaned_data.get("clear_api_key"):
            provider.api_key_ciphertext = ""
        elif self.cleaned_data.get("api_key"):
            provider.api_key_ciphertext = encrypt(self.cleaned_data["api_key"])
        if commit:
            provider.save()
        return provider


@admin.register(Provider)
class ProviderAdmin(admin.ModelAdmin):
    form = ProviderForm
    list_display = ["name", "kind", "base_url", "key", "default_model", "enabled", "updated_at"]
    list_filter = ["kind", "enabled"]
    search_fields = ["name", "base_url", "default_model"]
    readonly_fields = ["key", "created_at", "updated_at"]

    @admin.display(description="API key")
    def key(self, obj: Provider) -> str:
        return "•••••••• (stored, encrypted)" if obj.api_key_ciphertext else "— (environment)"


def _validation_count(*, successes_only: bool) -> Coalesce:
    """The number of validation tests of the row's model name, as a subquery
    (one SQL statement for a whole page of models, no join that multiplies rows)."""
    tests = ModelValidation.objects.filter(model=OuterRef("name"))
    if successes_only:
        tests = tests.filter(success=True)
    counted = tests.order_by().values("model").annotate(n=Count("id")).values("n")[:1]
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


class ValidationFilter(admin.SimpleListFilter):
    title = "tool validation"
    parameter_name = "validation"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [
            ("validated", f"Validated (≥ {VALIDATED_RATE:.0%} of tests)"),
            ("failing", "Tested, not validated"),
            ("untested", "Not tested"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[LanguageModel]) -> QuerySet[LanguageModel]:
        passing = {"val_successes__gte": F("val_tests") * VALIDATED_RATE}
        if self.value() == "validated":
            return queryset.filter(val_tests__gt=0, **passing)
        if self.value() == "failing":
            return queryset.filter(val_tests__gt=0).exclude(**passing)
        if self.value() == "untested":
            return queryset.filter(val_tests=0)
        return queryset


@admin.register(LanguageModel)
class LanguageModelAdmin(admin.ModelAdmin):
    list_display = [
        "name", "provider", "upstream_name", "supports_tools", "supports_streaming", "supports_reasoning",
        "supports_vision", "enabled", "validation",
    ]
    list_filter = [ValidationFilter, "provider", "enabled", "supports_tools", "supports_streaming",
                   "supports_reasoning", "supports_vision"]
    search_fields = ["name", "upstream_name", "provider__name"]
    list_select_related = ["provider"]
    autocomplete_fields = ["provider"]
    readonly_fields = ["validation", "created_at", "updated_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[LanguageModel]:
        return (
            super()
            .get_queryset(request)
            .annotate(val_tests=_validation_count(successes_only=False),
                      val_successes=_validation_count(successes_only=True))
        )

    @admin.display(description="tool validation", ordering="val_tests")
    def validation(self, obj: LanguageModel) -> str:
        status = ValidationStatus(obj.name, getattr(obj, "val_tests", 0), getattr(obj, "val_successes", 0))
        if status.tests == 0:
            return "not tested"
        mark = "validated" if status.validated else "not validated"
        return f"{mark} ({status.successes}/{status.tests}, {status.rate:.0%})"


@admin.register(ModelValidation)
class ModelValidationAdmin(admin.ModelAdmin):
    """Every tool-calling test ever run; read-only. Deleting tests (e.g. after
    fixing a model's configuration) is allowed: it resets the model's rate."""

    list_display = ["model", "success", "tool_calls", "iterations", "created_at", "short_query", "short_error",
                    "run_link"]
    list_filter = ["success", "model"]
    search_fields = ["model", "query", "error"]
    date_hierarchy = "created_at"
    show_full_result_count = False
    fields = ["model", "success", "tool_calls", "iterations", "query", "error", "run_link", "created_at"]
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ModelValidation | None = None) -> bool:
        return False

    @admin.display(description="query")
    def short_query(self, obj: ModelValidation) -> str:
        return _shorten(obj.query)

    @admin.display(description="error")
    def short_error(self, obj: ModelValidation) -> str:
        return _shorten(obj.error) or "—"

    @admin.display(description="run")
    def run_link(self, obj: ModelValidation) -> str:
        if obj.run_id is None:
            return "—"
        return format_html('<a href="{}">trace</a>', reverse("admin:conversations_run_change", args=[obj.run_id]))


def _shorten(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
