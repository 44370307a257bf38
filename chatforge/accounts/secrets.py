"""Users' stored secrets: write, list, delete, read for tools, rotate keys.

Values go in encrypted (``chatforge.accounts.crypto``) and come out only for
tools, through ``secret_lookup_for``. Nothing here logs or returns a value:
logs name the user id and the secret's name, which is all an operator needs.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from django.contrib.auth.models import AbstractBaseUser

from chatforge.errors import InvalidRequest

from .crypto import InvalidToken, decrypt, encrypt, reencrypt
from .models import SECRET_NAME_PATTERN, UserSecret

logger = logging.getLogger(__name__)

_NAME = re.compile(SECRET_NAME_PATTERN)
# Far above any API key or token, low enough that a row stays small.
MAX_SECRET_CHARS = 10_000

SecretLookup = Callable[[str], str | None]


def check_secret_name(name: str) -> None:
    """Refuse a name the model field would refuse, with a message a person can act on."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidRequest(
            f"Invalid secret name {name!r}: use 1-64 characters from a-z, 0-9 and '_' "
            "(e.g. tavily_api_key).",
            details={"field": "name"},
        )


def check_secret_value(value: str) -> None:
    # The messages never quote the value: error bodies and logs must not carry it.
    if not isinstance(value, str) or not value:
        raise InvalidRequest("The secret value must be a non-empty string.", details={"field": "value"})
    if len(value) > MAX_SECRET_CHARS:
        raise InvalidRequest(
            f"The secret value is too long: at most {MAX_SECRET_CHARS} characters.",
            details={"field": "value"},
        )


def user_secret_set(*, user: AbstractBaseUser, name: str, value: str) -> UserSecret:
    """Store (or replace) ``user``'s secret ``name``, encrypted with the current key."""
    check_secret_name(name)
    check_secret_value(value)
    secret, created = UserSecret.objects.update_or_create(
        user=user, name=name, defaults={"ciphertext": encrypt(value)}
    )
    logger.info(
        "%s secret %s of user %s",
        "Created" if created else "Replaced",
        name,
        user.pk,
        extra={"user_id": user.pk, "secret_name": name},
    )
    return secret


def user_secret_delete(*, user: AbstractBaseUser, name: str) -> bool:
    """Delete ``user``'s secret ``name``; False when there was none.
    ``InvalidRequest`` for a name no secret can have (a NUL reached Postgres
    and answered 500)."""
    check_secret_name(name)
    deleted, _ = UserSecret.objects.filter(user=user, name=name).delete()
    if deleted:
        logger.info(
            "Deleted secret %s of user %s", name, user.pk, extra={"user_id": user.pk, "secret_name": name}
        )
    return bool(deleted)


def user_secret_names(*, user: AbstractBaseUser) -> list[str]:
    """The names of ``user``'s secrets, sorted; never their values."""
    return list(UserSecret.objects.filter(user=user).order_by("name").values_list("name", flat=True))


def user_secret_get(*, user_id: int, name: str, ciphertexts: Mapping[str, str] | None = None) -> str | None:
    """The plaintext of a user's secret, or None if missing or undecryptable.
    ``ciphertexts``: the user's secrets already read (the engine's claim reads
    them with the step); without it, one query."""
    if ciphertexts is not None:
        ciphertext = ciphertexts.get(name)
    else:
        ciphertext = (
            UserSecret.objects.filter(user_id=user_id, name=name).values_list("ciphertext", flat=True).first()
        )
    return None if ciphertext is None else _decrypt_or_none(ciphertext, user_id=user_id, name=name)


def secret_lookup_for(user_id: int | None, *, ciphertexts: Mapping[str, str] | None = None) -> SecretLookup:
    """The ``ToolContext.secret_lookup`` for one tool call of ``user_id``.

    The user's ciphertexts are read here, in the caller's thread, in one query
    (or given, when the caller read them already): tool handlers run in their
    own short-lived threads (``tools.runner``), and a query from there would
    open a database connection that nobody closes. Values are decrypted only
    when a tool asks, and each at most once.
    """
    if user_id is None:
        return lambda name: None
    if ciphertexts is None:
        ciphertexts = dict(UserSecret.objects.filter(user_id=user_id).values_list("name", "ciphertext"))
    decrypted: dict[str, str | None] = {}

    def lookup(name: str) -> str | None:
        if name not in decrypted:
            ciphertext = ciphertexts.get(name)
            decrypted[name] = (
                None if ciphertext is None else _decrypt_or_none(ciphertext, user_id=user_id, name=name)
            )
        return decrypted[name]

    return lookup


@dataclass
class RotationReport:
    """What ``user_secrets_rotate`` did, for the management command to print."""

    rotated: int = 0
    # Rows changed by someone else while rotating: already under the new key.
    changed_meanwhile: int = 0
    # (user id, name) of rows no configured key can decrypt: left untouched.
    undecryptable: list[tuple[int, str]] = field(default_factory=list)


def user_secrets_rotate(*, batch_size: int = 500) -> RotationReport:
    """Re-encrypt every stored secret with the first configured key.

    Each row is updated only if its ciphertext is still the one that was read
    (compare-and-swap), so a value a user sets meanwhile is never overwritten
    with the old one, and no long transaction or lock is needed.
    """
    report = RotationReport()
    rows = UserSecret.objects.order_by("pk").values_list("pk", "user_id", "name", "ciphertext")
    for pk, user_id, name, ciphertext in rows.iterator(chunk_size=batch_size):
        try:
            rotated = reencrypt(ciphertext)
        except InvalidToken:
            logger.warning(
                "Secret %s of user %s cannot be decrypted with CHATFORGE_SECRET_KEYS; not rotated",
                name,
                user_id,
                extra={"user_id": user_id, "secret_name": name},
            )
            report.undecryptable.append((user_id, name))
            continue
        if UserSecret.objects.filter(pk=pk, ciphertext=ciphertext).update(ciphertext=rotated):
            report.rotated += 1
        else:
            report.changed_meanwhile += 1
    logger.info(
        "Rotated %d secrets (%d changed meanwhile, %d undecryptable)",
        report.rotated,
        report.changed_meanwhile,
        len(report.undecryptable),
    )
    return report


def _decrypt_or_none(ciphertext: str, *, user_id: int, name: str) -> str | None:
    try:
        return decrypt(ciphertext)
    except InvalidToken:
        # The key that wrote it was removed, or the row was altered. The user
        # must set the secret again; tools carry on as if it were missing.
        logger.warning(
            "Secret %s of user %s cannot be decrypted with CHATFORGE_SECRET_KEYS; treating it as missing",
            name,
            user_id,
            extra={"user_id": user_id, "secret_name": name},
        )
        return None
