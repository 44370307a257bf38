"""``GET /api/runs/{id}/events/``: a run's events as Server-Sent Events.

Each event is ``id: <seq>``, ``event: <type>``, ``data: <json>``. A client
resumes with the ``Last-Event-ID`` header (browsers' EventSource sends it
when reconnecting) or ``?after=N``; the stream closes after the terminal
event, and a comment line keeps idle connections open. Authentication is the
REST API's: ``Authorization: Bearer <token>`` or the browser session. DRF's
authentication classes do not run in a plain async view, so they are
mirrored here with the same error bodies.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from chatforge.accounts.auth_failures import TooManyFailures, client_of_request
from chatforge.accounts.tokens import authenticate_token
from chatforge.api.errors import error_body
from chatforge.conversations.selectors import run_of
from chatforge.db.connections import db_sync_to_async
from chatforge.observability import record
from orchestration.event_log import codec
from orchestration.event_log.base import Event
from orchestration.services.run_follower import follow_run

from .resume import parse_resume_point

KEEPALIVE_S = 15.0
KEEPALIVE = b": keep-alive\n\n"


class _AuthError(Exception):
    def __init__(self, code: str, message: str, *, status: int = 401, retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.retry_after_s = retry_after_s

    def response(self) -> JsonResponse:
        if self.retry_after_s is not None:
            return JsonResponse(error_body(self.code, self.message, {"retry_after_s": self.retry_after_s}),
                                status=self.status, headers={"Retry-After": str(self.retry_after_s)})
        return JsonResponse(error_body(self.code, self.message), status=self.status,
                            headers={"WWW-Authenticate": "Bearer"})


async def _authenticate(request: HttpRequest) -> AbstractBaseUser | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if header and scheme.lower() == "bearer":
        token = token.strip()
        if not token:
            raise _AuthError("authentication_failed", "The Authorization header has no token after 'Bearer'.")
        try:
            user = await db_sync_to_async(authenticate_token)(token, client=client_of_request(request))
        except TooManyFailures as exc:
            raise _AuthError("throttled", str(exc), status=429, retry_after_s=exc.retry_after_s) from None
        if user is None:
            raise _AuthError(
                "authentication_failed", "The API token is invalid or revoked. Create a new one in your settings."
            )
        return user
    user = await request.auser()
    return user if user.is_authenticated else None


def _resume_point(request: HttpRequest) -> int:
    """``Last-Event-ID`` (a reconnecting EventSource) wins over ``?after``;
    ``ValueError`` when the one given is not an event seq."""
    header = parse_resume_point(request.headers.get("Last-Event-ID"), source="Last-Event-ID header")
    if header is not None:
        return header
    return parse_resume_point(request.GET.get("after"), source="after parameter") or 0


def format_event(event: Event) -> bytes:
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (event["seq"], event["type"].encode(), codec.encode(event))


async def with_keepalive(events: AsyncIterator[Event], *, interval_s: float = KEEPALIVE_S) -> AsyncIterator[bytes]:
    """Formatted events, with a keep-alive comment after each ``interval_s``
    of silence (proxies close idle connections)."""
    pending: asyncio.Future | None = None
    record.stream_opened("sse")
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(events))
            done, _ = await asyncio.wait({pending}, timeout=interval_s)
            if not done:
                yield KEEPALIVE
                continue
            try:
                event = pending.result()
            except StopAsyncIteration:
                pending = None
                return
            pending = None
            yield format_event(event)
            record.event_relayed(event)
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        with contextlib.suppress(BaseException):
            await events.aclose()
        record.stream_closed("sse")


@csrf_exempt  # read-only: any other method is answered 405 before anything happens
async def run_events_sse(request: HttpRequest, run_id: str) -> HttpResponse:
    if request.method != "GET":
        return JsonResponse(
            error_body("method_not_allowed", f"Use GET to read a run's events; {request.method} is not allowed."),
            status=405,
            headers={"Allow": "GET"},
        )
    try:
        user = await _authenticate(request)
    except _AuthError as exc:
        return exc.response()
    if user is None:
        return JsonResponse(
            error_body(
                "not_authenticated",
                "Authentication credentials were not provided: send 'Authorization: Bearer <API token>' "
                "or log in.",
            ),
            status=401,
            headers={"WWW-Authenticate": "Bearer"},
        )
    run = await db_sync_to_async(run_of)(user, run_id)
    if run is None:
        return JsonResponse(
            error_body("not_found", "Not found: it does not exist or you do not have access to it."), status=404
        )
    try:
        after = _resume_point(request)
    except ValueError as exc:
        return JsonResponse(error_body("invalid_request", str(exc)), status=400)
    response = StreamingHttpResponse(
        with_keepalive(follow_run(str(run.id), after=after)), content_type="text/event-stream; charset=utf-8"
    )
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: pass events through at once
    return response
