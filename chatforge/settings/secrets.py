"""Secrets: the keys that encrypt users' stored secrets, and the web search service.

``CHATFORGE_SECRET_KEYS`` is a comma-separated list of Fernet keys. The first
encrypts, all of them decrypt, so a key is rotated by prepending a new one,
running ``manage.py rotate_secrets`` and then dropping the old one. Like
``DJANGO_SECRET_KEY``, production (debug off) has no default: without a key
the process refuses to start rather than store secrets under a guessable key.
In debug mode, with none set, ``chatforge.accounts.crypto`` derives one from
``SECRET_KEY`` so embedded mode needs no setup.
"""

from __future__ import annotations

from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from chatforge.settings.env import env

from .base import DEBUG

_GENERATE_HINT = (
    'generate one with `python -c "from cryptography.fernet import Fernet; '
    'print(Fernet.generate_key().decode())"`'
)

CHATFORGE_SECRET_KEYS: list[str] = env.list("CHATFORGE_SECRET_KEYS", default=[])
if not CHATFORGE_SECRET_KEYS and not DEBUG:
    raise ImproperlyConfigured(
        "CHATFORGE_SECRET_KEYS is not set. Production (DJANGO_DEBUG=false) refuses to start "
        f"without a key to encrypt users' stored secrets: {_GENERATE_HINT}, and set "
        "CHATFORGE_SECRET_KEYS to it (comma-separate several keys to rotate: the first encrypts)."
    )
for _position, _key in enumerate(CHATFORGE_SECRET_KEYS, start=1):
    try:
        Fernet(_key)
    except ValueError:
        # Name the position, never the value: settings errors end up in logs.
        raise ImproperlyConfigured(
            f"CHATFORGE_SECRET_KEYS entry {_position} is not a Fernet key (32 url-safe "
            f"base64-encoded bytes): {_GENERATE_HINT}."
        ) from None

# Web search (the web_search tool). A user's own key (their secret
# "tavily_api_key") takes precedence; this one serves users without one.
TAVILY_API_KEY: str = env.str("TAVILY_API_KEY", default="")
TAVILY_BASE_URL: str = env.str("TAVILY_BASE_URL", default="https://api.tavily.com")
