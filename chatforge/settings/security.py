"""Throttling of failed sign-ins and tokens, and the Content-Security-Policy.

What each protects, and why it is set so, is in docs/security.md.
"""

from __future__ import annotations

from csp.constants import NONCE, NONE, SELF

from chatforge.settings.env import env

from .base import DEBUG

# Failed passwords and API tokens a client (address) may send per window
# before it is answered 429 with Retry-After (0: no limit).
CHATFORGE_AUTH_FAILURE_LIMIT: int = env.int("CHATFORGE_AUTH_FAILURE_LIMIT", default=20)
CHATFORGE_AUTH_FAILURE_WINDOW_S: int = env.int("CHATFORGE_AUTH_FAILURE_WINDOW_S", default=300)

# Whether anyone may read /api/schema/ and /api/docs/ (else only signed-in
# users and token holders). The DRF browsable API is on in debug only.
CHATFORGE_PUBLIC_API_DOCS: bool = env.bool("CHATFORGE_PUBLIC_API_DOCS", default=DEBUG)

# A strict policy for every HTML page: scripts and styles only from our own
# origin (the few inline <style> blocks of our admin templates carry the
# request's nonce), no plugins, no framing, forms post only to us. The
# websockets and fetches of the pages go to the same origin ('self' covers
# ws:/wss: of the same host in CSP level 3). Images may also be blob: URLs:
# the chat page previews a chosen image from the browser's own copy
# (URL.createObjectURL) while it uploads.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, NONCE],
        "img-src": [SELF, "data:", "blob:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}
