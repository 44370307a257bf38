"""File names as clients send them, made safe to show and to quote.

A name is only ever a label: the bytes are stored under a key we make
(``services.storage_name_for``), so nothing here has to stop a name from
reaching the file system. What it does stop is a name that misleads or
breaks what shows it: a path (``../../etc/passwd``, ``C:\\x``), NUL and
control characters, CR/LF (a download's ``Content-Disposition`` header, a
log line), and the Unicode bidirectional overrides and isolates that make
``invoice‮fdp.exe`` read as ``invoiceexe.pdf``.
"""

from __future__ import annotations

import unicodedata

MAX_NAME_CHARS = 200
FALLBACK_NAME = "file"
# The longest tail after the last dot kept as an extension when a name is
# shortened (".xlsx", ".markdown"); longer tails are just part of the name.
_MAX_EXTENSION_CHARS = 16

# Bidirectional embeddings, overrides and isolates, and the implicit marks.
_BIDI = {chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)}


def _allowed(char: str) -> bool:
    if char in _BIDI:
        return False
    # Cc: C0/C1 controls, NUL, CR, LF, TAB, DEL. Cf other than the bidi
    # marks (zero-width joiners in emoji, soft hyphens) are left alone.
    return unicodedata.category(char) not in ("Cc", "Cs", "Zl", "Zp")


def safe_name(raw: str | None) -> str:
    """The display name for a file a client called ``raw``: its last path
    component, without control or bidi characters, trimmed, at most
    MAX_NAME_CHARS characters with its extension kept, "file" if nothing is left."""
    text = unicodedata.normalize("NFC", raw or "")
    text = "".join(char for char in text if _allowed(char))
    # Both separators: a Windows client sends C:\Users\me\report.pdf.
    text = text.replace("\\", "/").rsplit("/", 1)[-1]
    text = " ".join(text.split())  # runs of spaces (and other whitespace) to one space, trimmed
    if not text.strip("."):  # nothing, or only dots ("..")
        return FALLBACK_NAME
    text = text.rstrip(" .")  # "report." is "report"; a leading dot (".env") is kept
    if len(text) > MAX_NAME_CHARS:
        text = _shortened(text)
    return text


def _shortened(text: str) -> str:
    stem, dot, extension = text.rpartition(".")
    if dot and stem and len(extension) <= _MAX_EXTENSION_CHARS:
        keep = MAX_NAME_CHARS - len(extension) - 1
        return stem[:keep].rstrip(" .") + "." + extension
    return text[:MAX_NAME_CHARS].rstrip(" .")


def extension_of(name: str) -> str:
    """The lowercased extension of a (safe) name, without its dot; "" if none."""
    stem, dot, extension = name.rpartition(".")
    return extension.lower() if dot and stem else ""


def ascii_fallback(name: str) -> str:
    """The name for ``Content-Disposition``'s plain ``filename=``: printable
    ASCII only, without the quote and backslash that would end or escape
    the quoted string (clients that read ``filename*`` get the real name)."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    cleaned = "".join(char if 0x20 <= ord(char) < 0x7F and char not in '"\\;%' else "_" for char in folded)
    return cleaned.strip() or FALLBACK_NAME
