"""What the check reads back from ChatForge's own API (docs/api.md).

Each request Open WebUI sends to ``/v1`` is a run: a chat's message in a
conversation marked ``source: "openai"`` (a later message of the same chat
continues it, decision 0032), a request to the ``background-tasks`` model
in one marked ``source: "task"``. The answer is an assistant message that
carries the run id, the model and the stored ``tool_rounds``. The check
reads the exchanges (a user message and the answer to it) posted since it
started, so earlier ones of the same user do not count.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

SOURCES = ("openai", "task")


def _timestamp(value: str | None) -> float:
    return datetime.fromisoformat(value).timestamp() if value else 0.0


@dataclass
class Exchange:
    """One user message of a ``/v1`` conversation and its answer (None while it runs)."""

    conversation_id: str
    source: str
    user_text: str
    asked_at: float
    answer: dict[str, Any] | None

    def tool_calls(self) -> list[dict[str, Any]]:
        """Every call of the answer's tool rounds, with its result's status."""
        calls: list[dict[str, Any]] = []
        for round_ in (self.answer or {}).get("tool_rounds") or []:
            results = {r.get("tool_call_id"): r for r in round_.get("results") or []}
            for call in round_.get("tool_calls") or []:
                result = results.get(call.get("id")) or {}
                calls.append({"name": call.get("name"), "status": result.get("status")})
        return calls


def exchanges_of(conversation_id: str, source: str, messages: list[dict[str, Any]], since: float) -> list[Exchange]:
    """Pair each user message posted since ``since`` with the assistant message after it."""
    exchanges: list[Exchange] = []
    for index, message in enumerate(messages):
        if message.get("role") != "user" or _timestamp(message.get("created_at")) < since:
            continue
        answer = None
        for later in messages[index + 1 :]:
            if later.get("role") == "user":
                break
            if later.get("role") == "assistant" and later.get("run"):
                answer = later
        exchanges.append(Exchange(conversation_id, source, str(message.get("content") or ""),
                                  _timestamp(message.get("created_at")), answer))
    return exchanges


class ApiError(RuntimeError):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class ChatForge:
    """ChatForge's REST API with a user's API token."""

    def __init__(self, base_url: str, token: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.http = httpx.AsyncClient(
            base_url=self.base_url, timeout=30.0, headers={"Authorization": f"Bearer {token}"}
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _json(self, path: str, **params: Any) -> Any:
        response = await self.http.get(path, params=params or None)
        if response.status_code >= 400:
            raise ApiError(f"GET {path} → {response.status_code}: {response.text[:500]}", response.status_code)
        return response.json()

    async def v1_model_ids(self) -> list[str]:
        return [m["id"] for m in (await self._json("/v1/models")).get("data") or []]

    async def tool_names(self) -> set[str]:
        """The server's tools (its catalog): calls of other names are a client's."""
        return {tool["name"] for tool in await self._json("/api/tools/")}

    async def exchanges_since(self, since: float) -> list[Exchange]:
        """The ``/v1`` exchanges posted since ``since`` (a ``time.time()``), oldest first.

        Conversations are listed by last activity, and starting a run touches
        its conversation, so only the first page's recent ones are read.
        """
        exchanges: list[Exchange] = []
        for source in SOURCES:
            try:
                page = await self._json("/api/conversations/", source=source, limit=100)
            except ApiError as error:
                if error.status == 400 and source != "openai":
                    continue  # a ChatForge from before that source existed
                raise
            for conversation in page.get("results") or []:
                if _timestamp(conversation.get("updated_at")) < since:
                    break
                messages = await self._json(f"/api/conversations/{conversation['id']}/messages/", limit=200)
                exchanges += exchanges_of(conversation["id"], source, messages.get("results") or [], since)
        return sorted(exchanges, key=lambda e: e.asked_at)

    async def run(self, run_id: str) -> dict[str, Any]:
        return await self._json(f"/api/runs/{run_id}/")
