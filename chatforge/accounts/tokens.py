"""Creating and checking API tokens.

A token is 32 random bytes; only its SHA-256 is stored. Plain SHA-256 (not a
slow password hash) is right here because the secret is high-entropy random
data, not something a person chose, and lookups happen on every request.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from chatforge.db.sql_rows import columns, fetch, load

from .auth_failures import record_auth_failure
from .models import ApiToken

TOKEN_PREFIX = "cf_"


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    plaintext: str  # shown to the user once, never stored


def _hash(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def api_token_create(*, user: AbstractBaseUser, name: str) -> IssuedToken:
    token = ApiToken(user=user, name=name)
    return IssuedToken(token=token, plaintext=api_token_issue(token=token))


def api_token_issue(*, token: ApiToken) -> str:
    """Give an unsaved token (user and name set) a fresh secret, insert it, and
    return the plaintext, which exists nowhere else from then on.

    For callers that already hold the instance, such as the admin's add form;
    others use ``api_token_create``.
    """
    plaintext = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token.prefix = plaintext[:10]
    token.key_hash = _hash(plaintext)
    token.save(force_insert=True)
    return plaintext


def api_tokens_revoke(*, tokens: QuerySet[ApiToken]) -> int:
    """Revoke every still-active token of ``tokens`` in one statement; returns
    how many were revoked (already revoked ones keep their revocation time)."""
    return tokens.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())


def api_token_revoke(*, token: ApiToken) -> None:
    """Revoke one token through the same conditional update as the bulk path."""
    api_tokens_revoke(tokens=ApiToken.objects.filter(pk=token.pk))
    token.refresh_from_db(fields=["revoked_at"])


def api_token_rotate(*, token: ApiToken) -> IssuedToken:
    """Revoke ``token`` and issue a new one with the same name and owner.

    Both happen in one transaction, so a failure never leaves the user with
    neither token nor with two live ones.
    """
    with transaction.atomic():
        api_token_revoke(token=token)
        return api_token_create(user=token.user, name=token.name)


def _live_token(key_hash: str) -> ApiToken | None:
    """The unrevoked token with this hash, with its user: fixed SQL, as every
    API request asks (``chatforge.db.sql_rows``)."""
    user_model = get_user_model()
    sql = (f'SELECT {columns(ApiToken, "t")}, {columns(user_model, "u")} FROM {ApiToken._meta.db_table} t '
           f'JOIN {user_model._meta.db_table} u ON u."{user_model._meta.pk.column}" = t."user_id" '
           'WHERE t."key_hash" = %s AND t."revoked_at" IS NULL')
    found = fetch(ApiToken, sql, [key_hash])
    if not found:
        return None
    token, user_columns = found[0]
    token.user = load(user_model, user_columns)
    return token


def user_for_token(plaintext: str) -> AbstractBaseUser | None:
    """The active user a token belongs to, or None for unknown/revoked tokens."""
    token = _live_token(_hash(plaintext))
    if token is None or not token.user.is_active:
        return None
    # Recording use is best effort and cheap: at most once a minute per token.
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user


def authenticate_token(plaintext: str, *, client: str | None) -> AbstractBaseUser | None:
    """``user_for_token`` for a request from ``client``: a failure is counted,
    and raises ``TooManyFailures`` once the client has failed too often
    (``chatforge.accounts.auth_failures``)."""
    user = user_for_token(plaintext)
    if user is None:
        record_auth_failure(client=client)
    return user
