"""Small real clients for tests: REST over httpx, run events over websockets."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect


@dataclass
class ApiClient:
    base_url: str
    token: str

    def _client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30)

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        with self._client() as client:
            return client.request(method, path, **kwargs)

    def new_conversation(self) -> str:
        response = self.request("POST", "/api/conversations/", json={})
        assert response.status_code == 201, response.text
        return response.json()["id"]

    def post_message(self, conversation_id: str, content: str, **options: Any) -> dict[str, Any]:
        response = self.request(
            "POST", f"/api/conversations/{conversation_id}/messages/", json={"content": content, **options}
        )
        assert response.status_code == 202, response.text
        return response.json()


def run_socket_url(ws_base: str, run_id: str, after: int | None = None) -> str:
    url = f"{ws_base}/ws/runs/{run_id}/"
    return url if after is None else f"{url}?after={after}"


def follow_run(ws_base: str, run_id: str, token: str, *, after: int | None = None,
               limit: int | None = None, timeout: float = 60.0) -> list[dict[str, Any]]:
    """Collect events until the server closes the socket (after the terminal
    event) or, with ``limit``, until that many events arrived."""
    events: list[dict[str, Any]] = []
    with connect(
        run_socket_url(ws_base, run_id, after),
        additional_headers={"Authorization": f"Bearer {token}"},
        open_timeout=10,
    ) as ws:
        try:
            while limit is None or len(events) < limit:
                events.append(json.loads(ws.recv(timeout=timeout)))
        except ConnectionClosed:
            pass
    return events
