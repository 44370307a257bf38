"""A websocket consumer that owns its background tasks and always says goodbye.

Our sockets do their work in background tasks (tailing a run's event log,
watching a conversation for new runs) while the consumer itself waits for
client messages. Channels leaves both halves to the subclass, which is how
sockets used to die without a close frame (the client saw 1006) and leave
their tail task orphaned ("Task exception was never retrieved"). Here:

- ``spawn`` starts a background task that belongs to the socket. A task
  that fails closes the socket with 1011 (1013 when Postgres or Redis is
  unreachable); a task that finds the client gone just ends.
- However the consumer ends — the client leaves, we close, a handler
  raises, the server cancels it while shutting down — every task it spawned
  is cancelled and awaited before the consumer returns.
- A failure after the handshake closes with 1011/1013 instead of escaping
  to the server (which would drop the connection without a close frame); a
  failure before it is raised to ``HandshakeGuard``, which answers 503 for
  an outage. Cancelled by the server, an open socket closes with 1001.
- The socket never joins the channel layer (``channel_layer_alias = None``):
  events come from the run's event log, not from channel-layer messages,
  and a channel-layer receive is one more connection that can fail
  (docs/decisions/0009-run-sockets-without-channel-layer.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from channels.generic.websocket import AsyncWebsocketConsumer

from chatforge.errors.outages import is_outage
from chatforge.observability import record

from . import close_codes

logger = logging.getLogger(__name__)

# Saying goodbye to a client that stopped reading must not hold up shutdown.
GOODBYE_TIMEOUT_S = 2.0
# How long a socket that ends waits for its background tasks to stop, and
# how often it cancels them again meanwhile (see _cancel_background).
CANCEL_WAIT_S = 10.0
RECANCEL_EVERY_S = 0.1


class ClientGone(Exception):
    """The client left (or we closed): nothing more can be sent."""


class ManagedSocket(AsyncWebsocketConsumer):
    channel_layer_alias = None  # Channels 4: no channel layer, no channel-layer receive

    _accepted: bool = False
    _closed: bool = False  # we sent a close, the client left, or a send found it gone
    # The kind of stream it is in the open-streams metric.
    stream_kind: str = "websocket"

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        self._background: set[asyncio.Task] = set()

        async def tracked_send(message: dict[str, Any]) -> None:
            kind = message["type"]
            if self._closed and kind in ("websocket.send", "websocket.close"):
                raise ClientGone()
            try:
                await send(message)
            except OSError as exc:  # uvicorn's ClientDisconnected is one; other servers raise OSErrors too
                self._closed = True
                raise ClientGone() from exc
            if kind == "websocket.accept":
                self._accepted = True
                record.stream_opened(self.stream_kind)
            elif kind == "websocket.close":
                self._closed = True

        try:
            await super().__call__(scope, receive, tracked_send)
        except asyncio.CancelledError:
            await self._goodbye(close_codes.GOING_AWAY)  # the server is cancelling us: it is going away
            raise
        except ClientGone:
            pass
        except Exception as exc:
            if not self._accepted:
                raise  # the handshake: HandshakeGuard answers 503 for an outage, the server 500 otherwise
            self._log_failure(exc, "handling a message")
            await self._goodbye(close_codes.close_code_for(exc))
        finally:
            await self._cancel_background()
            if self._accepted:
                record.stream_closed(self.stream_kind)

    async def close(self, code: int | None = None, reason: str | None = None) -> None:
        """Close once; closing a socket that is already closed or gone does nothing."""
        if self._closed:
            return
        try:
            await super().close(code=code, reason=reason)
        except ClientGone:
            pass

    async def websocket_disconnect(self, message: dict[str, Any]) -> None:
        self._closed = True
        if message.get("code") in (close_codes.GOING_AWAY, close_codes.SERVICE_RESTART):
            logger.debug("websocket closed by the server going away (%s)", message.get("code"))
        await super().websocket_disconnect(message)

    def spawn(self, work: Callable[..., Awaitable[object]], *args: Any, name: str) -> asyncio.Task:
        """Run ``work(*args)`` in the background for as long as the socket lives.

        Takes the function, not a coroutine, so a task cancelled before it
        starts leaves no never-awaited coroutine behind."""
        task = asyncio.create_task(self._guarded(work, args, name), name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _guarded(self, work: Callable[..., Awaitable[object]], args: tuple, name: str) -> None:
        try:
            await work(*args)
        except ClientGone:
            pass
        except Exception as exc:  # noqa: BLE001 - any failure of the work ends the socket with a close code
            self._log_failure(exc, name)
            await self._goodbye(close_codes.close_code_for(exc))

    async def _goodbye(self, code: int) -> None:
        """Close an open socket with ``code``, if it is still open to close."""
        if not self._accepted or self._closed:
            return
        try:
            await asyncio.wait_for(self.close(code=code), GOODBYE_TIMEOUT_S)
        except (TimeoutError, ClientGone):
            self._closed = True

    async def _cancel_background(self) -> None:
        """Cancel every task the socket spawned and wait until each has ended.

        Cancel more than once: a cancellation that arrives while a task waits
        on ``database_sync_to_async`` is swallowed (asgiref waits for the
        thread and returns its result), and the task would go on to its next
        blocking read. A task still alive after ``CANCEL_WAIT_S`` (a database
        call that hangs) is left to end on its own; ``_guarded`` keeps any
        exception of it from going unretrieved."""
        current = asyncio.current_task()
        pending = {task for task in self._background if task is not current and not task.done()}
        deadline = asyncio.get_running_loop().time() + CANCEL_WAIT_S
        while pending:
            for task in pending:
                task.cancel()
            _, pending = await asyncio.wait(pending, timeout=RECANCEL_EVERY_S)
            if pending and asyncio.get_running_loop().time() >= deadline:
                logger.warning("websocket %s: %d background task(s) did not stop within %s s",
                               self.scope.get("path", "?"), len(pending), CANCEL_WAIT_S)
                return

    def _log_failure(self, exc: BaseException, what: str) -> None:
        path = self.scope.get("path", "?") if hasattr(self, "scope") else "?"
        if is_outage(exc):
            logger.warning("websocket %s: %s failed, a service is unreachable: %r", path, what, exc)
        else:
            logger.error("websocket %s: %s failed", path, what, exc_info=exc)
