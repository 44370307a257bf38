"""Authenticated encryption of users' stored secrets.

Fernet (AES-128-CBC with HMAC-SHA256) both hides a value and detects any
change to its ciphertext, so a tampered or foreign row fails to decrypt rather
than yielding garbage. ``MultiFernet`` makes keys rotatable: the first key
encrypts, every key decrypts, so an operator prepends a new key, runs
``manage.py rotate_secrets`` and only then removes the old one.
"""

from __future__ import annotations

import base64
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

__all__ = ["InvalidToken", "decrypt", "encrypt", "multi_fernet", "reencrypt", "secret_keys"]

# Binds the derived development key to this one use of SECRET_KEY, so it never
# equals a key derived from SECRET_KEY for anything else.
_DEBUG_KEY_INFO = b"chatforge user secrets v1"


def secret_keys() -> tuple[str, ...]:
    """The Fernet keys in force, the encrypting one first.

    Settings normally refuse to start production without keys; the check is
    repeated here because settings can be overridden after start-up (tests,
    ``override_settings``).
    """
    configured = tuple(key.strip() for key in settings.CHATFORGE_SECRET_KEYS if key.strip())
    if configured:
        return configured
    if not settings.DEBUG:
        raise ImproperlyConfigured(
            "CHATFORGE_SECRET_KEYS is not set, and without DJANGO_DEBUG no key is derived: "
            'generate one with `python -c "from cryptography.fernet import Fernet; '
            'print(Fernet.generate_key().decode())"`.'
        )
    return (_derived_debug_key(settings.SECRET_KEY),)


def multi_fernet() -> MultiFernet:
    """The cipher for the current keys (built once per distinct key list)."""
    return _multi_fernet(secret_keys())


def encrypt(plaintext: str) -> str:
    """``plaintext`` encrypted with the first key, as ASCII text for a TextField."""
    return multi_fernet().encrypt(plaintext.encode("utf-8")).decode("ascii")


def decrypt(ciphertext: str) -> str:
    """The plaintext of ``ciphertext``; raises ``InvalidToken`` if no key opens it
    or it was altered."""
    return multi_fernet().decrypt(_token_bytes(ciphertext)).decode("utf-8")


def reencrypt(ciphertext: str) -> str:
    """``ciphertext`` re-encrypted with the first key (``InvalidToken`` as for decrypt).

    The original timestamp is kept, so rotating does not make old secrets look new.
    """
    return multi_fernet().rotate(_token_bytes(ciphertext)).decode("ascii")


def _token_bytes(ciphertext: str) -> bytes:
    """A Fernet token is ASCII; anything else is as invalid as a bad signature."""
    try:
        return ciphertext.encode("ascii")
    except UnicodeEncodeError:
        raise InvalidToken from None


@lru_cache(maxsize=8)
def _multi_fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key) for key in keys])


@lru_cache(maxsize=4)
def _derived_debug_key(secret_key: str) -> str:
    """A deterministic Fernet key from Django's SECRET_KEY, for debug mode only.

    Deterministic so secrets survive restarts of a development server; HKDF so
    the Fernet key reveals nothing about SECRET_KEY.
    """
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_DEBUG_KEY_INFO).derive(
        secret_key.encode("utf-8")
    )
    return base64.urlsafe_b64encode(derived).decode("ascii")
