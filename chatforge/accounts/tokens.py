"""Creating and checking API tokens.

A token is 32 random bytes; only its SHA-256 is stored. Plain SHA-256 (not a
slow password hash) is right here because the secret is high-entropy random
data, not something a person chose, and lookups happen on every request.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from .models import ApiToken

TOKEN_PREFIX = "cf_"


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    plaintext: str  # shown to the user once, never stored


def _hash(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def api_token_create(*, user: AbstractBaseUser, name: str) -> IssuedToken:
    plaintext = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name, prefix=plaintext[:10], key_hash=_hash(plaintext)
    )
    return IssuedToken(token=token, plaintext=plaintext)


def api_token_revoke(*, token: ApiToken) -> None:
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])


def user_for_token(plaintext: str) -> AbstractBaseUser | None:
    """The active user a token belongs to, or None for unknown/revoked tokens."""
    token = (
        ApiToken.objects.select_related("user")
        .filter(key_hash=_hash(plaintext), revoked_at__isnull=True)
        .first()
    )
    if token is None or not token.user.is_active:
        return None
    # Recording use is best effort and cheap: at most once a minute per token.
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user
