"""Forms of the settings page. Secret values are write-only: the field never
renders a value back, and errors never quote it."""

from __future__ import annotations

from django import forms

from chatforge.accounts.models import SECRET_NAME_PATTERN
from chatforge.accounts.secrets import MAX_SECRET_CHARS


class SecretForm(forms.Form):
    name = forms.RegexField(
        regex=rf"^{SECRET_NAME_PATTERN}\Z",
        max_length=64,
        error_messages={"invalid": "Use 1-64 characters from a-z, 0-9 and '_' (e.g. tavily_api_key)."},
        widget=forms.TextInput(attrs={"placeholder": "tavily_api_key", "autocomplete": "off"}),
    )
    value = forms.CharField(
        max_length=MAX_SECRET_CHARS,
        strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Stored encrypted; never shown again. Saving a name you already have replaces its value.",
    )


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        widget=forms.TextInput(attrs={"placeholder": "laptop script", "autocomplete": "off"}),
        help_text="A label to recognise the token by.",
    )
