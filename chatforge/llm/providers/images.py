"""Images in user messages, between storage and the providers' wire formats.

A user message's images are URLs: base64 ``data:image/…`` URLs, or
``http(s)://`` URLs for providers that fetch them. They are stored on
``Message.content_json`` as OpenAI content parts (the form clients sent
them in) and reach adapters as ``ChatMessage.images``; each adapter writes
its vendor's block (image_url, input_image, Anthropic image source, Gemini
inline_data, Ollama's base64 list).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from chatforge.files.message_parts import file_parts

_DATA_URL = re.compile(r"data:(?P<mime>image/[a-z0-9.+-]+);base64,(?P<data>.*)", re.DOTALL)


def data_url_parts(url: str) -> tuple[str, str] | None:
    """``(media type, base64 data)`` of a data URL; None for any other URL."""
    match = _DATA_URL.match(url)
    return (match["mime"], match["data"]) if match else None


def content_parts(text: str, images: Sequence[str], file_ids: Sequence[Any] = ()) -> list[dict[str, Any]] | None:
    """What ``Message.content_json`` stores for a user message with images
    or attached files (``chatforge/files/message_parts.py``); None without:
    the text alone is the message."""
    if not images and not file_ids:
        return None
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    return parts + [{"type": "image_url", "image_url": {"url": url}} for url in images] + file_parts(file_ids)


def images_of(content_json: Any) -> tuple[str, ...]:
    """The image URLs stored on a message's ``content_json``."""
    if not isinstance(content_json, list):
        return ()
    return tuple(
        part["image_url"]["url"] for part in content_json
        if isinstance(part, dict) and part.get("type") == "image_url"
        and isinstance(part.get("image_url"), dict) and isinstance(part["image_url"].get("url"), str)
    )
