"""A password hasher for the test process: Django's PBKDF2 at 1,000
iterations instead of a million.

Hashing a password costs about half a second at Django's count on these
cores, and the suite makes users (and signs them in) thousands of times: the
authorization matrix alone spent two minutes hashing. The hashes keep the
``pbkdf2_sha256`` format, so the servers the integration tests start — with
the production settings and their default hashers — verify them too (the
count is read from the hash; they re-hash at their own on the first sign-in).
"""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1_000
