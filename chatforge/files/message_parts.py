"""How a user message's ``content_json`` names its attached files: a content
part ``{"type": "file", "file_id": …}`` beside OpenAI's text and image_url
parts (``chatforge/llm/providers/images.py``), so that reading a history
knows which messages carry files without a query for those that carry none."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

FILE_PART = "file"


def file_parts(file_ids: Iterable[Any]) -> list[dict[str, Any]]:
    return [{"type": FILE_PART, "file_id": str(i)} for i in file_ids]


def attached_file_ids(content_json: Any) -> list[str]:
    """The ids of the files a stored message's ``content_json`` names."""
    if not isinstance(content_json, list):
        return []
    return [part["file_id"] for part in content_json
            if isinstance(part, dict) and part.get("type") == FILE_PART and isinstance(part.get("file_id"), str)]
