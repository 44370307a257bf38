from django import forms
from django.contrib import admin

from .crypto import encrypt
from .models import ApiToken, UserSecret
from .secrets import MAX_SECRET_CHARS


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "user__username", "prefix"]
    readonly_fields = ["prefix", "key_hash", "created_at", "last_used_at"]


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

    def clean(self) -> dict:
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
    raw_id_fields = ["user"]

    @admin.display(description="value")
    def masked_value(self, obj: UserSecret) -> str:
        return "••••"
