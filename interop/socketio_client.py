"""The few Socket.IO client frames Open WebUI's web page uses, over one websocket.

Open WebUI answers a chat request from its page at once (``{"task_ids"}``)
and streams the answer, the title, the tags and the follow-ups as Socket.IO
``events`` to the user's room; its page joins that room by connecting with
its token. The check listens the same way. Only what that needs is spoken:
Engine.IO 4 open and ping/pong, a Socket.IO 5 connect with ``auth``, and
text event frames (``42[...]``); no polling transport, no binary frames, no
acknowledgements. The project's own `websockets` package carries it, so the
check needs nothing installed into the project's venv.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import websockets


@dataclass(frozen=True)
class SocketEvent:
    """One ``events`` frame: its arrival (``time.monotonic()``) and payload
    (``{"chat_id", "message_id", "data": {"type", "data"}}``)."""

    at: float
    payload: dict[str, Any]

    @property
    def type(self) -> str:
        return str((self.payload.get("data") or {}).get("type") or "")

    @property
    def data(self) -> dict[str, Any]:
        inner = (self.payload.get("data") or {}).get("data")
        return inner if isinstance(inner, dict) else {}

    @property
    def message_id(self) -> str | None:
        return self.payload.get("message_id")


class SocketIOClient:
    """Connects as Open WebUI's page does and records every ``events`` frame."""

    def __init__(self, base_url: str, token: str) -> None:
        self._url = base_url.replace("http", "ws", 1).rstrip("/") + "/ws/socket.io/?EIO=4&transport=websocket"
        self._token = token
        self._socket: Any = None
        self._reader: asyncio.Task | None = None
        self._changed = asyncio.Condition()
        self.events: list[SocketEvent] = []
        self.sid: str | None = None

    async def connect(self, timeout_s: float = 15.0) -> str:
        """Open the socket, join the user's room; returns the Socket.IO sid
        (what the page sends as ``session_id``)."""
        self._socket = await websockets.connect(self._url, open_timeout=timeout_s, max_size=None)
        opening = await asyncio.wait_for(self._socket.recv(), timeout_s)
        if not str(opening).startswith("0"):
            raise RuntimeError(f"Engine.IO open expected, got {str(opening)[:200]!r}")
        await self._socket.send("40" + json.dumps({"token": self._token}))
        while self.sid is None:
            frame = str(await asyncio.wait_for(self._socket.recv(), timeout_s))
            if frame == "2":
                await self._socket.send("3")
            elif frame.startswith("40"):
                self.sid = json.loads(frame[2:] or "{}").get("sid")
            elif frame.startswith("44"):
                raise RuntimeError(f"Socket.IO connect refused: {frame[2:200]}")
        # The page announces itself once connected; the room is already joined by the token.
        await self._emit("user-join", {"auth": {"token": self._token}})
        self._reader = asyncio.create_task(self._read())
        return self.sid

    async def _emit(self, name: str, data: Any) -> None:
        await self._socket.send("42" + json.dumps([name, data]))

    async def _read(self) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            async for frame in self._socket:
                frame = str(frame)
                if frame == "2":
                    await self._socket.send("3")
                    continue
                if not frame.startswith("42"):
                    continue
                try:
                    name, *args = json.loads(frame[2:])
                except ValueError:
                    continue
                if name == "events" and args and isinstance(args[0], dict):
                    async with self._changed:
                        self.events.append(SocketEvent(time.monotonic(), args[0]))
                        self._changed.notify_all()

    async def wait_for(
        self, predicate: Callable[[SocketEvent], bool], timeout_s: float, since: int = 0
    ) -> SocketEvent | None:
        """The first event (from index ``since``) that satisfies ``predicate``,
        waiting up to ``timeout_s``; None when none came."""
        deadline = time.monotonic() + timeout_s
        async with self._changed:
            while True:
                for event in self.events[since:]:
                    if predicate(event):
                        return event
                since = len(self.events)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), remaining)

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        if self._socket is not None:
            with contextlib.suppress(Exception):
                await self._socket.close()
