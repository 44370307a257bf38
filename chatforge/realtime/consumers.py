"""Websockets for run events.

``/ws/runs/{run_id}/?after=N``: one run's events — replay what the client
missed, then live ones, closing after the terminal event.
``/ws/conversations/{id}/``: the events of every run of one conversation,
those active when the client connects and those started while it stays
connected; it stays open until the client leaves.

Both read through ``orchestration/services/run_follower.follow_run``, which sends a snapshot from
Postgres where the event log lost what the client asks for. Neither joins
the channel layer; their lifecycle (background tasks cancelled however the
socket ends, close codes) is ``managed_socket.ManagedSocket``'s.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from django.utils import timezone

from chatforge.conversations.models import Conversation, Run
from chatforge.conversations.selectors import conversations_of, run_of
from chatforge.errors import ChatForgeError
from chatforge.observability import record
from orchestration.event_log import codec
from orchestration.event_log.events import TERMINAL_TYPES
from orchestration.services.approvals import decide
from orchestration.services.run_follower import follow_run
from orchestration.services.runs import run_request_cancel

from . import close_codes
from .auth import SUBPROTOCOL_SCOPE_KEY
from .handshake import deny_handshake
from .managed_socket import ManagedSocket
from .resume import parse_resume_point

CLOSE_UNAUTHENTICATED = close_codes.UNAUTHENTICATED
CLOSE_NOT_FOUND = close_codes.NOT_FOUND
# How often the conversation socket looks for runs started since the last look.
NEW_RUN_POLL_S = 1.0
# Runs created this long before the socket connected count as new if they
# were not seen at connect (tolerates clock differences between web hosts).
NEW_RUN_GRACE = timedelta(seconds=60)


def approval_message_problem(message: dict) -> str | None:
    """What is wrong with an ``approval`` message, or None."""
    if not isinstance(message.get("tool_call_id"), str) or not message["tool_call_id"]:
        return 'Name the call: {"type": "approval", "tool_call_id": "…", "decision": "approve"}.'
    if message.get("decision") not in ("approve", "deny"):
        return '"decision" must be "approve" or "deny".'
    reason = message.get("reason")
    if reason is not None and (not isinstance(reason, str) or len(reason) > 2000):
        return '"reason" must be text of at most 2000 characters.'
    # Postgres text cannot hold NUL: the query failed and the socket closed with 1011.
    for field in ("tool_call_id", "reason"):
        if "\x00" in (message.get(field) or ""):
            return f'"{field}" contains a NUL character (\\u0000), which cannot be stored; remove it.'
    return None


def _after_from_query(query_string: bytes) -> int:
    """The ``?after=`` seq (0 when absent); ``ValueError`` when it is not a seq."""
    values = parse_qs(query_string.decode("latin-1")).get("after")
    return parse_resume_point(values[0] if values else None, source="after parameter") or 0


class _EventSocket(ManagedSocket):
    async def accept(self, subprotocol: str | None = None, headers=None) -> None:
        # A socket signed in through the "chatforge.bearer" subprotocol is
        # accepted with it: a browser drops a socket accepted without it.
        await super().accept(subprotocol=subprotocol or self.scope.get(SUBPROTOCOL_SCOPE_KEY), headers=headers)

    async def _send_error(self, message: str) -> None:
        await self.send(text_data=json.dumps({"type": "error", "data": {"message": message}}))

    async def _receive_json(self, text_data: str | None) -> dict | None:
        try:
            message = json.loads(text_data or "")
        except json.JSONDecodeError:
            await self._send_error('Messages must be JSON, e.g. {"type": "cancel"}.')
            return None
        if not isinstance(message, dict):
            await self._send_error('Messages must be JSON objects, e.g. {"type": "cancel"}.')
            return None
        return message

    async def _stream_run(self, run_id: str, after: int) -> bool:
        """Send the run's events; True when its terminal event was sent."""
        async for event in follow_run(run_id, after=after):
            await self.send(text_data=codec.text(event))
            record.event_relayed(event)
            if event["type"] in TERMINAL_TYPES:
                return True
        return False


class RunEventsConsumer(_EventSocket):
    run: Run | None = None
    stream_kind = "websocket_run"

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        run_id = self.scope["url_route"]["kwargs"]["run_id"]
        self.run = await database_sync_to_async(run_of)(user, run_id)
        if self.run is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        try:
            after = _after_from_query(self.scope.get("query_string", b""))
        except ValueError as exc:
            await deny_handshake(self.scope, self.base_send, status=400, code="invalid_request", message=str(exc),
                                 close_code=close_codes.BAD_REQUEST)
            return
        await self.accept()
        run_id = str(self.run.id)
        self.spawn(self._send_events, run_id, after, name=f"run-events:{run_id}")

    async def _send_events(self, run_id: str, after: int) -> None:
        # The stream ends after the terminal event (or at once for a client
        # already past it). A client going away does not cancel the run; it
        # can reconnect with ?after=N.
        await self._stream_run(run_id, after)
        await self.close(code=close_codes.NORMAL)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        message = await self._receive_json(text_data)
        if message is None:
            return
        if message.get("type") == "cancel" and self.run is not None:
            await database_sync_to_async(run_request_cancel)(run=self.run)
            return
        if message.get("type") == "approval" and self.run is not None:
            await self._decide(message)
            return
        await self._send_error('Unknown message. The messages accepted are {"type": "cancel"} and '
                               '{"type": "approval", "tool_call_id": "…", "decision": "approve" or "deny"}.')

    async def _decide(self, message: dict) -> None:
        """A decision on a call awaiting approval; its outcome arrives as the
        ``approval.decided`` event, a refusal as an ``error`` message."""
        problem = approval_message_problem(message)
        if problem:
            await self._send_error(problem)
            return
        try:
            await database_sync_to_async(decide)(
                run_id=str(self.run.id), tool_call_id=message["tool_call_id"], user=self.scope["user"],
                decision=message["decision"], reason=message.get("reason") or "")
        except ChatForgeError as exc:
            await self._send_error(exc.message)


def _runs_to_follow(conversation_id: str, *, since, seen: set[str]) -> tuple[list[str], bool]:
    """Ids of the conversation's runs not yet seen that are active or were
    created since ``since``; and whether the conversation still exists."""
    if not Conversation.objects.filter(pk=conversation_id).exists():
        return [], False
    rows = Run.objects.filter(conversation_id=conversation_id, created_at__gte=since).values_list("id", flat=True)
    active = Run.objects.filter(
        conversation_id=conversation_id, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]
    ).values_list("id", flat=True)
    found = {str(run_id) for run_id in [*rows, *active]}
    ordered = sorted(found - seen)
    return ordered, True


def _recent_finished_run_ids(conversation_id: str, since) -> set[str]:
    return {
        str(run_id)
        for run_id in Run.objects.filter(conversation_id=conversation_id, created_at__gte=since)
        .exclude(status__in=[Run.Status.QUEUED, Run.Status.RUNNING])
        .values_list("id", flat=True)
    }


class ConversationEventsConsumer(_EventSocket):
    """Every run of one conversation: the runs active at connect, then each
    run started later (found by looking for new runs once a second).
    Runs that had already ended when the client connected are not replayed:
    their messages are in ``GET /api/conversations/{id}/messages/``."""

    stream_kind = "websocket_conversation"

    conversation_id: str | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        conversation_id = self.scope["url_route"]["kwargs"]["conversation_id"]
        conversation = await database_sync_to_async(_conversation_of)(user, conversation_id)
        if conversation is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.user = user
        self.conversation_id = str(conversation.id)
        await self.accept()
        self.spawn(self._watch, self.conversation_id, name=f"conversation-watch:{self.conversation_id}")

    async def _watch(self, conversation_id: str) -> None:
        since = timezone.now() - NEW_RUN_GRACE
        # Runs that ended before we connected (within the grace window) are
        # history, not news: mark them seen.
        seen = await database_sync_to_async(_recent_finished_run_ids)(conversation_id, since)
        while True:
            new, exists = await database_sync_to_async(_runs_to_follow)(conversation_id, since=since, seen=seen)
            if not exists:
                await self.close(code=CLOSE_NOT_FOUND)
                return
            for run_id in new:
                seen.add(run_id)
                self.spawn(self._stream_run, run_id, 0, name=f"conversation-run-events:{run_id}")
            await asyncio.sleep(NEW_RUN_POLL_S)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        message = await self._receive_json(text_data)
        if message is None:
            return
        if message.get("type") == "cancel":
            run = await database_sync_to_async(_run_in_conversation)(
                self.user, str(message.get("run_id") or ""), self.conversation_id
            )
            if run is None:
                await self._send_error(
                    'Name the run to cancel: {"type": "cancel", "run_id": "<a run of this conversation>"}.'
                )
                return
            await database_sync_to_async(run_request_cancel)(run=run)
            return
        await self._send_error(
            'Unknown message. The only message accepted is {"type": "cancel", "run_id": "…"}.'
        )


def _conversation_of(user, conversation_id: str) -> Conversation | None:
    from django.core.exceptions import ValidationError

    try:
        return conversations_of(user).filter(pk=conversation_id).first()
    except (ValueError, ValidationError):
        return None


def _run_in_conversation(user, run_id: str, conversation_id: str | None) -> Run | None:
    run = run_of(user, run_id) if run_id else None
    if run is None or str(run.conversation_id) != conversation_id:
        return None
    return run
