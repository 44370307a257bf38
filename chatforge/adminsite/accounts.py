"""Admin for API tokens and users' secrets.

Neither is ever shown: a token's plaintext exists only in the response that
issues it (creation or rotation) and is never stored; only a prefix
identifies it afterwards (its hash is not shown either). Secrets are
write-only: the form takes a new value, the lists show a mask.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.cache import add_never_cache_headers

from chatforge.accounts.crypto import encrypt
from chatforge.accounts.models import ApiToken, UserSecret
from chatforge.accounts.secrets import MAX_SECRET_CHARS
from chatforge.accounts.tokens import (
    IssuedToken,
    api_token_issue,
    api_token_revoke,
    api_token_rotate,
    api_tokens_revoke,
)

# Where save_model leaves the plaintext of a token it just issued for
# response_add, which renders it: one request, never stored anywhere.
_ISSUED_ATTR = "_chatforge_issued_tokens"


class TokenStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("active", "Active"), ("revoked", "Revoked")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> QuerySet[ApiToken]:
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix_shown", "active", "created_at", "last_used_at", "revoked_at"]
    list_filter = [TokenStatusFilter, "created_at", "last_used_at"]
    search_fields = ["name", "user__username", "^prefix"]
    list_select_related = ["user"]
    autocomplete_fields = ["user"]
    show_full_result_count = False
    actions = ["revoke_selected", "rotate_selected"]

    # --- the form: on add only user and name (the token is generated); later only the name changes

    def get_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> list[str]:
        if obj is None:
            return ["user", "name"]
        return ["user", "name", "prefix_shown", "created_at", "last_used_at", "revoked_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> list[str]:
        if obj is None:
            return []
        return ["user", "prefix_shown", "created_at", "last_used_at", "revoked_at"]

    @admin.display(description="token", ordering="prefix")
    def prefix_shown(self, obj: ApiToken) -> str:
        return f"{obj.prefix}…" if obj.prefix else "—"

    @admin.display(description="active", boolean=True, ordering="revoked_at")
    def active(self, obj: ApiToken) -> bool:
        return obj.revoked_at is None

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context: dict | None = None) -> HttpResponse:
        extra_context = {
            **(extra_context or {}),
            "show_save_and_add_another": False,
            "show_save_and_continue": False,
            "subtitle": "The token is generated when you save and shown once.",
        }
        return super().add_view(request, form_url, extra_context)

    def save_model(self, request: HttpRequest, obj: ApiToken, form: forms.ModelForm, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        issued = IssuedToken(token=obj, plaintext=api_token_issue(token=obj))
        setattr(request, _ISSUED_ATTR, [issued])

    def response_add(self, request: HttpRequest, obj: ApiToken, post_url_continue: str | None = None) -> HttpResponse:
        issued = getattr(request, _ISSUED_ATTR, None)
        if not issued:
            return super().response_add(request, obj, post_url_continue)
        return self._issued_response(request, issued, "Token created")

    def _issued_response(self, request: HttpRequest, issued: list[IssuedToken], title: str) -> TemplateResponse:
        """The one page that ever shows these plaintexts; nothing may cache it."""
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            "issued": issued,
        }
        response = TemplateResponse(request, "admin/accounts/apitoken/issued.html", context)
        add_never_cache_headers(response)
        return response

    # --- rotate and revoke: a confirmation page (GET), then the change (POST)

    def get_urls(self) -> list[URLPattern]:
        opts = self.opts
        custom = [
            path(
                "<int:object_id>/rotate/",
                self.admin_site.admin_view(self.rotate_view),
                name=f"{opts.app_label}_{opts.model_name}_rotate",
            ),
            path(
                "<int:object_id>/revoke/",
                self.admin_site.admin_view(self.revoke_view),
                name=f"{opts.app_label}_{opts.model_name}_revoke",
            ),
        ]
        return custom + super().get_urls()

    def rotate_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """Revoke the token and issue its replacement (same owner and name), shown once."""
        token = self._active_token_for_change(request, object_id, also_add=True)
        if isinstance(token, HttpResponse):
            return token
        if request.method != "POST":
            return self._confirm(request, token, "rotate")
        issued = api_token_rotate(token=token)
        self.log_change(request, token, f"Rotated: revoked and replaced by {issued.token.prefix}….")
        self.log_addition(request, issued.token, f"Issued by rotating {token.prefix}….")
        return self._issued_response(request, [issued], "Token rotated")

    def revoke_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        token = self._active_token_for_change(request, object_id)
        if isinstance(token, HttpResponse):
            return token
        if request.method != "POST":
            return self._confirm(request, token, "revoke")
        api_token_revoke(token=token)
        self.log_change(request, token, "Revoked.")
        self.message_user(request, f"Token “{token}” was revoked; requests using it are now refused.",
                          messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:accounts_apitoken_change", args=[token.pk]))

    def _active_token_for_change(
        self, request: HttpRequest, object_id: int, *, also_add: bool = False
    ) -> ApiToken | HttpResponse:
        token = get_object_or_404(ApiToken.objects.select_related("user"), pk=object_id)
        if not self.has_change_permission(request, token) or (also_add and not self.has_add_permission(request)):
            raise PermissionDenied
        if token.revoked_at is not None:
            self.message_user(request, f"Token “{token}” is already revoked.", messages.WARNING)
            return HttpResponseRedirect(reverse("admin:accounts_apitoken_change", args=[token.pk]))
        return token

    def _confirm(self, request: HttpRequest, token: ApiToken, what: str) -> TemplateResponse:
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"{what.capitalize()} token “{token}”?",
            "token": token,
            "what": what,
        }
        return TemplateResponse(request, "admin/accounts/apitoken/confirm.html", context)

    # --- bulk actions

    @admin.action(description="Revoke the selected tokens", permissions=["change"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        revoked = api_tokens_revoke(tokens=queryset)
        self.message_user(request, f"Revoked {revoked} token(s).", messages.SUCCESS)

    @admin.action(description="Rotate the selected tokens (new tokens shown once)", permissions=["change", "add"])
    def rotate_selected(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> HttpResponse | None:
        issued = []
        for token in queryset.filter(revoked_at__isnull=True).select_related("user"):
            new = api_token_rotate(token=token)
            self.log_change(request, token, f"Rotated: revoked and replaced by {new.token.prefix}….")
            issued.append(new)
        if not issued:
            self.message_user(request, "None of the selected tokens is active.", messages.WARNING)
            return None
        return self._issued_response(request, issued, "Tokens rotated")


class UserSecretForm(forms.ModelForm):
    """Edits a secret without ever showing it: ``value`` is write-only and the
    ciphertext is not a form field at all."""

    value = forms.CharField(
        widget=forms.PasswordInput(render_value=False),
        required=False,
        strip=False,
        max_length=MAX_SECRET_CHARS,
        help_text="Write-only: the stored value is never shown. Leave blank to keep the current value.",
    )

    class Meta:
        model = UserSecret
        fields = ["user", "name"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if self.instance.pk is None and not cleaned.get("value"):
            self.add_error("value", "A new secret needs a value.")
        return cleaned

    def save(self, commit: bool = True) -> UserSecret:
        secret = super().save(commit=False)
        if value := self.cleaned_data.get("value"):
            secret.ciphertext = encrypt(value)
        if commit:
            secret.save()
        return secret


@admin.register(UserSecret)
class UserSecretAdmin(admin.ModelAdmin):
    form = UserSecretForm
    list_display = ["user", "name", "masked_value", "updated_at"]
    list_select_related = ["user"]
    search_fields = ["user__username", "name"]
    fields = ["user", "name", "value", "created_at", "updated_at"]
    readonly_fields = ["created_at", "updated_at"]
    autocomplete_fields = ["user"]
    show_full_result_count = False

    @admin.display(description="value")
    def masked_value(self, obj: UserSecret) -> str:
        return "••••"
