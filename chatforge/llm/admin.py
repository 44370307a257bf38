"""Admin for providers (keys write-only, stored encrypted), models with their
validation status, and validation results (read-only)."""

from __future__ import annotations

from django import forms
from django.contrib import admin

from chatforge.accounts.crypto import encrypt

from .models import LanguageModel, ModelValidation, Provider
from .validation import all_validation_statuses


class ProviderForm(forms.ModelForm):
    api_key = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Write-only: stored encrypted, never shown. Leave blank to keep the current key.",
    )
    clear_api_key = forms.BooleanField(required=False, help_text="Remove the stored key (use the environment's).")

    class Meta:
        model = Provider
        fields = ["name", "kind", "base_url", "default_model", "enabled"]

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
    search_fields = ["name", "base_url"]

    @admin.display(description="API key")
    def key(self, obj: Provider) -> str:
        return "••••••••" if obj.api_key_ciphertext else "— (environment)"


@admin.register(LanguageModel)
class LanguageModelAdmin(admin.ModelAdmin):
    list_display = ["name", "provider", "upstream_name", "supports_tools", "supports_reasoning", "enabled", "validation"]
    list_filter = ["provider", "enabled", "supports_tools", "supports_reasoning"]
    search_fields = ["name", "upstream_name"]
    list_select_related = ["provider"]

    def get_queryset(self, request):
        self._statuses = all_validation_statuses()  # one query for the page, not one per row
        return super().get_queryset(request)

    @admin.display(description="tool validation")
    def validation(self, obj: LanguageModel) -> str:
        status = getattr(self, "_statuses", {}).get(obj.name)
        if status is None:
            return "not tested"
        mark = "validated" if status.validated else "not validated"
        return f"{mark} ({status.successes}/{status.tests}, {status.rate:.0%})"


@admin.register(ModelValidation)
class ModelValidationAdmin(admin.ModelAdmin):
    list_display = ["model", "success", "tool_calls", "iterations", "created_at", "query"]
    list_filter = ["success", "model"]
    search_fields = ["model", "query", "error"]
    readonly_fields = [f.name for f in ModelValidation._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
