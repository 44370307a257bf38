"""A small Server-Sent Events client over httpx streaming, for tests."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class SseResult:
    events: list[dict[str, Any]] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)


def read_sse(base_url: str, run_id: str, token: str, *, after: int | None = None,
             last_event_id: int | None = None, limit: int | None = None, timeout: float = 60.0) -> SseResult:
    """Events until the server closes the stream, or until ``limit`` events
    arrived (then the client hangs up, as a dropped connection would)."""
    headers = {"Authorization": f"Bearer {token}"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    params = {"after": after} if after is not None else None
    result = SseResult()
    with httpx.Client(timeout=timeout) as client:
        with client.stream("GET", f"{base_url}/api/runs/{run_id}/events/", headers=headers, params=params) as response:
            assert response.status_code == 200, response.read()
            assert response.headers["content-type"].startswith("text/event-stream")
            fields: dict[str, str] = {}
            for line in response.iter_lines():
                if line.startswith(":"):
                    result.comments.append(line)
                    continue
                if line == "":
                    if "data" in fields:
                        event = json.loads(fields["data"])
                        assert fields["id"] == str(event["seq"]) and fields["event"] == event["type"], fields
                        result.events.append(event)
                        if limit is not None and len(result.events) >= limit:
                            break
                    fields = {}
                    continue
                name, _, value = line.partition(":")
                fields[name] = value[1:] if value.startswith(" ") else value
    return result
