"""What a model is given of a message's attached files (docs/files.md,
"What the model gets"): images as image parts (base64 data URLs, which
every adapter writes in its vendor's form), documents as their text, read
once by the reading task and cut to the message's share of
CHATFORGE_ATTACHMENT_TEXT_TOKENS, with a note saying what was cut and how
to read the rest.
"""

from __future__ import annotations

import base64
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from chatforge.files.message_parts import attached_file_ids
from chatforge.files.models import StoredFile
from chatforge.files.storage import file_storage
from chatforge.files.text import text_state

# Tokens are counted as this many characters (a fair mean for English text
# and code across the providers' tokenizers; the budget is a bound, not a bill).
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class AttachedContent:
    """A message's attachments as the model gets them."""

    images: tuple[str, ...] = ()  # data URLs
    text: str = ""  # the documents' blocks, to follow the message's own text


def attached_content(messages: Iterable[Any]) -> dict[Any, AttachedContent]:
    """By message id, for the messages that carry files: one query for all
    of them, none when no message names a file."""
    wanted = {m.pk: attached_file_ids(m.content_json) for m in messages}
    wanted = {pk: ids for pk, ids in wanted.items() if ids}
    if not wanted:
        return {}
    found = {str(f.pk): f for f in StoredFile.objects.filter(pk__in=[i for ids in wanted.values() for i in ids])}
    return {pk: content_for([found[i] for i in ids if i in found]) for pk, ids in wanted.items()}


def content_for(files: Sequence[StoredFile]) -> AttachedContent:
    images = tuple(_data_url(f) for f in files if f.kind == StoredFile.Kind.IMAGE)
    budget = settings.CHATFORGE_ATTACHMENT_TEXT_TOKENS * CHARS_PER_TOKEN
    blocks: list[str] = []
    for file in files:
        if file.kind != StoredFile.Kind.DOCUMENT:
            continue
        block, used = _document_block(file, budget)
        budget -= used
        blocks.append(block)
    return AttachedContent(images=images, text="\n\n".join(blocks))


def with_attachments(text: str, content: AttachedContent | None) -> str:
    """The message's text followed by its documents' blocks."""
    if content is None or not content.text:
        return text
    return f"{text}\n\n{content.text}" if text else content.text


def _document_block(file: StoredFile, budget: int) -> tuple[str, int]:
    """The block the model reads for one document, and the characters of
    the message's budget it used."""
    head = f'<file name="{_attribute(file.name)}" id="{file.pk}" type="{file.content_type}">'
    state = text_state(file)
    if state.status == StoredFile.TextStatus.FAILED:
        return f"{head}\n[This file could not be read: {state.error}]\n</file>", 0
    if state.status != StoredFile.TextStatus.READY:
        return f"{head}\n[The text of this file is not available yet.]\n</file>", 0
    text = file.text
    shown = text[:max(0, budget)]
    notes = []
    if len(shown) < len(text):
        notes.append(
            f"[The text is cut here: {len(shown):,} of its {len(text):,} characters are shown, the message's "
            f"share of the attachments' budget. The read_file tool reads on: read_file(file_id=\"{file.pk}\", "
            f"offset={len(shown)}).]"
        )
    if file.text_truncated:
        notes.append(f"[The file is longer than the {settings.CHATFORGE_FILE_TEXT_MAX_CHARS:,} characters "
                     "ChatForge keeps of a document: its end is missing.]")
    body = "\n".join([shown, *notes]) if shown else "\n".join(notes) or "[The file has no text.]"
    return f"{head}\n{body}\n</file>", len(shown)


def _attribute(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


class _ImageCache:
    """Data URLs of images already read, by file id, within a byte bound:
    a file's bytes never change, and every turn of a conversation sends its
    images again."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._urls: OrderedDict[str, str] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self._lock:
            url = self._urls.get(key)
            if url is not None:
                self._urls.move_to_end(key)
            return url

    def put(self, key: str, url: str) -> None:
        with self._lock:
            if key in self._urls or len(url) > self._max_bytes:
                return
            self._urls[key] = url
            self._bytes += len(url)
            while self._bytes > self._max_bytes:
                _, evicted = self._urls.popitem(last=False)
                self._bytes -= len(evicted)


_images = _ImageCache(max_bytes=64 * 1024 * 1024)


def _data_url(file: StoredFile) -> str:
    key = str(file.pk)
    url = _images.get(key)
    if url is None:
        with file_storage().open(file.storage_name, "rb") as handle:
            data = handle.read()
        url = f"data:{file.content_type};base64,{base64.b64encode(data).decode('ascii')}"
        _images.put(key, url)
    return url
