"""Close codes our websockets send, in one place.

Standard codes (RFC 6455 §7.4.1 and the IANA registry) say what kind of
end it was; 44xx mirror the HTTP status a REST client would get. A close
before the handshake is accepted becomes an HTTP 403 (the ASGI spec), so
4401/4404 reach clients as a refused handshake. 4400, 4403 and 4429 are
refusals that carry a reason: where the server can (uvicorn), the handshake
is answered with that HTTP status and a JSON error body instead, and these
codes are what other servers' clients see (``handshake.deny_handshake``).
"""

from __future__ import annotations

from chatforge.errors.outages import is_outage

NORMAL = 1000  # the run ended: its terminal event was the last message
GOING_AWAY = 1001  # this server process is shutting down; reconnect elsewhere
INTERNAL_ERROR = 1011  # a bug or unexpected failure on our side
SERVICE_RESTART = 1012  # sent by uvicorn itself when it shuts down
TRY_AGAIN_LATER = 1013  # Postgres or Redis unreachable; reconnect later
BAD_REQUEST = 4400  # e.g. an ?after= that is not an event seq
UNAUTHENTICATED = 4401
FORBIDDEN = 4403  # a cookie-authenticated socket from an origin that is not allowed
NOT_FOUND = 4404
TOO_MANY_REQUESTS = 4429  # too many failed tokens from this address


def close_code_for(exc: BaseException) -> int:
    """1013 when a service we depend on is down, else 1011."""
    return TRY_AGAIN_LATER if is_outage(exc) else INTERNAL_ERROR
