"""Websocket for one run's events: replay what the client missed (``after``),
then tail live events from the run's event log until the terminal event."""

from __future__ import annotations

import asyncio
import json
import logging
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from channels.generic.websocket import AsyncWebsocketConsumer

from chatforge.conversations.models import Run
from chatforge.conversations.selectors import run_of
from orchestration.event_log import get_event_log
from orchestration.events import TERMINAL_TYPES
from orchestration.services.runs import run_request_cancel

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
_BLOCK_MS = 5000
_MAX_READ_FAILURES = 30


def _after_from_query(query_string: bytes) -> int:
    values = parse_qs(query_string.decode()).get("after", ["0"])
    try:
        return max(0, int(values[0]))
    except ValueError:
        return 0


def _run_is_terminal(run_id: str) -> bool:
    status = Run.objects.filter(pk=run_id).values_list("status", flat=True).first()
    return status is None or status in Run.TERMINAL


class RunEventsConsumer(AsyncWebsocketConsumer):
    run: Run | None = None
    _tail: asyncio.Task | None = None

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
        await self.accept()
        after = _after_from_query(self.scope.get("query_string", b""))
        self._tail = asyncio.create_task(self._send_events(str(self.run.id), after))

    async def _send_events(self, run_id: str, after: int) -> None:
        log = get_event_log()
        failures = 0
        try:
            while True:
                try:
                    events = await log.aread(run_id, after=after, block_ms=_BLOCK_MS)
                    failures = 0
                except (RedisConnectionError, RedisTimeoutError) as exc:
                    # A Redis blip must not end the client's stream: wait and
                    # read again from the same seq (nothing is lost or repeated).
                    failures += 1
                    if failures > _MAX_READ_FAILURES:
                        raise
                    logger.warning("reading events of run %s failed (%s); retrying", run_id, exc)
                    await asyncio.sleep(min(0.2 * failures, 2.0))
                    continue
                for event in events:
                    await self.send(text_data=json.dumps(event, ensure_ascii=False))
                    after = event["seq"]
                    if event["type"] in TERMINAL_TYPES:
                        await self.close()
                        return
                if not events and await database_sync_to_async(_run_is_terminal)(run_id):
                    # The run ended but its log has no terminal event for us
                    # (expired or wiped): nothing more will come.
                    await self.close()
                    return
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("event stream for run %s failed", run_id)
            await self.close(code=1011)

    async def disconnect(self, code: int) -> None:
        # A client going away does not cancel the run; it can reconnect with ?after=N.
        if self._tail is not None:
            self._tail.cancel()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            message = json.loads(text_data or "")
        except json.JSONDecodeError:
            await self._send_error('Messages must be JSON, e.g. {"type": "cancel"}.')
            return
        if isinstance(message, dict) and message.get("type") == "cancel" and self.run is not None:
            await database_sync_to_async(run_request_cancel)(run=self.run)
            return
        await self._send_error('Unknown message. The only message accepted is {"type": "cancel"}.')

    async def _send_error(self, message: str) -> None:
        await self.send(text_data=json.dumps({"type": "error", "data": {"message": message}}))
