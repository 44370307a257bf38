"""Open WebUI's own HTTP API, called as its web page calls it (0.12.4).

The routes and bodies are those of Open WebUI 0.12.4's backend
(``open_webui/main.py``, ``routers/auths.py``) and of its page
(``src/lib/components/chat/Chat.svelte``, ``sendMessageSocket``): a chat
message is ``POST /api/chat/completions`` with the page's Socket.IO
``session_id``, the assistant message's ``id``, the ``user_message`` node of
the chat's history, ``parent_id`` (``null`` for a new chat, which the server
then creates), ``features``, ``tool_ids``, ``variables``, ``model_item`` and
``background_tasks``; the answer arrives on the socket. Stop is
``POST /api/tasks/chat/{chat_id}/stop``.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx


@dataclass
class TurnRequest:
    """What the page sends for one message, and the ids it made up for it."""

    content: str
    model_item: dict[str, Any]
    chat_id: str | None = None
    parent_id: str | None = None  # the previous assistant message; None starts a chat
    user_message_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    assistant_message_id: str = field(default_factory=lambda: str(uuid.uuid4()))


def output_text(output: Any) -> str:
    """The text of Open WebUI's response items (``output``: message items
    with ``output_text`` parts), as its page shows it."""
    texts: list[str] = []
    for item in output if isinstance(output, list) else []:
        if isinstance(item, dict) and item.get("type") == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") == "output_text":
                    texts.append(str(part.get("text") or ""))
    return "".join(texts)


class OpenWebUI:
    """A signed-in Open WebUI user, speaking to its backend over HTTP."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.http = httpx.AsyncClient(base_url=self.base_url, timeout=60.0)
        self.token: str | None = None
        self.user: dict[str, Any] = {}

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = await self.http.request(method, path, **kwargs)
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {path} → {response.status_code}: {response.text[:500]}")
        return response.json()

    async def version(self) -> str:
        return str((await self._json("GET", "/api/version")).get("version"))

    async def sign_up(self, name: str, email: str, password: str) -> dict[str, Any]:
        """The first account of a fresh Open WebUI is its admin."""
        self.user = await self._json(
            "POST", "/api/v1/auths/signup", json={"name": name, "email": email, "password": password}
        )
        self.token = self.user["token"]
        self.http.headers["Authorization"] = f"Bearer {self.token}"
        return self.user

    async def config(self) -> dict[str, Any]:
        return await self._json("GET", "/api/config")

    async def models(self) -> list[dict[str, Any]]:
        return (await self._json("GET", "/api/models")).get("data") or []

    async def chat(self, chat_id: str) -> dict[str, Any]:
        return await self._json("GET", f"/api/v1/chats/{chat_id}")

    async def stop_chat(self, chat_id: str) -> dict[str, Any]:
        """What the page's Stop button calls once the chat has an id."""
        return await self._json("POST", f"/api/tasks/chat/{chat_id}/stop")

    def _user_message(self, turn: TurnRequest) -> dict[str, Any]:
        return {
            "id": turn.user_message_id,
            "parentId": turn.parent_id,
            "childrenIds": [turn.assistant_message_id],
            "role": "user",
            "user": {"id": self.user.get("id"), "name": self.user.get("name")},
            "user_id": self.user.get("id"),
            "content": turn.content,
            "timestamp": int(time.time()),
            "models": [turn.model_item.get("id")],
        }

    @staticmethod
    def _features(config: dict[str, Any]) -> dict[str, Any]:
        """The page's ``getFeatures()`` with no toggle pressed (an admin)."""
        features: dict[str, Any] = {
            "voice": False,
            "image_generation": False,
            "code_interpreter": False,
            "web_search": False,
        }
        if (config.get("features") or {}).get("enable_memories"):
            features["memory"] = True
        return features

    def _variables(self) -> dict[str, str]:
        """The page's ``getPromptVariables()``."""
        now = datetime.now().astimezone()
        return {
            "{{USER_NAME}}": str(self.user.get("name") or ""),
            "{{USER_EMAIL}}": str(self.user.get("email") or "Unknown"),
            "{{USER_LOCATION}}": "Unknown",
            "{{CURRENT_DATETIME}}": now.strftime("%Y-%m-%d %H:%M:%S"),
            "{{CURRENT_DATE}}": now.strftime("%Y-%m-%d"),
            "{{CURRENT_TIME}}": now.strftime("%H:%M:%S"),
            "{{CURRENT_WEEKDAY}}": now.strftime("%A"),
            "{{CURRENT_TIMEZONE}}": str(now.tzinfo or "UTC"),
            "{{USER_LANGUAGE}}": "en-US",
        }

    def turn_body(self, turn: TurnRequest, *, session_id: str, config: dict[str, Any]) -> dict[str, Any]:
        """The body of the page's ``generateOpenAIChatCompletion`` call for a
        saved (not temporary) chat: no ``messages`` (the server reads the
        chat's history), title and tags asked for on a chat's first message
        only, follow-ups on every message (the page's defaults)."""
        first_message = turn.chat_id is None
        features = config.get("features") or {}
        return {
            "stream": True,
            "model": turn.model_item.get("id"),
            "params": {"model_controls": {}},
            "tool_ids": [],
            "tool_servers": [] if features.get("enable_tool_servers") else None,
            "features": self._features(config),
            "variables": self._variables(),
            "model_item": turn.model_item,
            "session_id": session_id,
            **({"chat_id": turn.chat_id} if turn.chat_id else {}),
            "id": turn.assistant_message_id,
            "parent_id": turn.parent_id,
            "user_message": self._user_message(turn),
            "background_tasks": {
                **({"title_generation": True, "tags_generation": True} if first_message else {}),
                "follow_up_generation": True,
            },
        }

    async def send(self, turn: TurnRequest, *, session_id: str, config: dict[str, Any]) -> dict[str, Any]:
        """Post a message; answers ``{"status", "task_ids", "chat_id"}`` at once."""
        body = self.turn_body(turn, session_id=session_id, config=config)
        if body["tool_servers"] is None:
            del body["tool_servers"]
        return await self._json("POST", "/api/chat/completions", json=body)
