"""API tokens (random secrets shown once, stored only as a hash) and users'
own secrets (encrypted at rest, never shown again)."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    # First characters of the token, to recognise it in lists without revealing it.
    prefix = models.CharField(max_length=16)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


SECRET_NAME_PATTERN = r"[a-z0-9_]{1,64}"


class UserSecret(models.Model):
    """A secret a user stored for their tools (e.g. ``tavily_api_key``).

    Only the ciphertext is stored (see ``chatforge.accounts.crypto``); the
    value is written through ``chatforge.accounts.secrets`` and is never
    returned by the API or shown in the admin.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="secrets")
    name = models.CharField(
        max_length=64,
        validators=[
            RegexValidator(
                rf"^{SECRET_NAME_PATTERN}\Z",
                "Use 1-64 characters from a-z, 0-9 and '_' (e.g. tavily_api_key).",
            )
        ],
    )
    ciphertext = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["user", "name"], name="accounts_usersecret_unique_user_name"),
        ]

    def __str__(self) -> str:
        return self.name
