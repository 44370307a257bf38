"""Text as it is: plain text, Markdown, CSV, code, JSON and the like.

Decoded as UTF-8 (a UTF-8 or UTF-16 byte-order mark is honoured and
dropped), a megabyte at a time, and no further than ``max_chars``: a
64 MiB log costs what its first two million characters cost. Bytes that
are not UTF-8, or NUL characters (binary data), refuse the file rather
than give the model mangled text.

CSV stays CSV, not a Markdown table: models read CSV as well as tables,
the exact values and quoting survive, a table's padding and pipes would
spend a fifth or more of the message's attachment budget on layout, and
CSV cut at any line is still CSV.
"""

from __future__ import annotations

import codecs

from .result import DocumentText, UnreadableDocument, clean_text

_CHUNK = 1024 * 1024


def read_plain(path: str, *, max_chars: int) -> DocumentText:
    with open(path, "rb") as stream:
        head = stream.read(4)
        stream.seek(0)
        encoding = _encoding(head)
        decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
        parts: list[str] = []
        length = 0
        offset = 0  # bytes given to the decoder so far
        while True:
            chunk = stream.read(_CHUNK)
            final = not chunk
            pending = len(decoder.getstate()[0])
            try:
                text = decoder.decode(chunk, final)
            except UnicodeDecodeError as exc:
                position = offset - pending + exc.start
                raise UnreadableDocument(
                    f"The file is not UTF-8 text: the byte at position {position:,} is not valid UTF-8. Save "
                    "it as UTF-8 (most editors offer it under \"Save as\" or \"Encoding\") and upload it again."
                ) from exc
            offset += len(chunk)
            if "\x00" in text:
                raise UnreadableDocument(
                    "The file holds NUL characters, so it is binary data rather than text: upload the "
                    "document it came from, or a text export of it."
                )
            if length + len(text) > max_chars:
                parts.append(text[:max_chars - length])
                return DocumentText(text=clean_text("".join(parts)), truncated=True)
            parts.append(text)
            length += len(text)
            if final:
                return DocumentText(text=clean_text("".join(parts)), truncated=False)


def _encoding(head: bytes) -> str:
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    return "utf-8"
