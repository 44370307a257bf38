"""What reading a document gives, what stops it, and the bounds it keeps."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True)
class DocumentText:
    """The text read from a document: at most ``max_chars`` characters,
    ``truncated`` when the document had more; ``pages`` for a PDF."""

    text: str
    truncated: bool
    pages: int | None = None


class UnreadableDocument(Exception):
    """The document cannot be read to text. ``message`` is for the person who
    uploaded it: what is wrong, and what to do about it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class ReadingLimits:
    """The bounds that keep one document from taking a worker's memory or
    minutes of its time (docs/files.md, "Reading documents"). Each refusal
    names the bound it met.

    - ``max_pages``: a PDF with more pages is refused before any is read
      (its page tree's declared count).
    - ``time_budget_s``: reading a PDF stops, refused, once this much time
      has passed (checked between pages; the task's soft time limit is the
      backstop for one page, or one office document, that takes longer).
    - ``max_zip_members`` / ``max_unpacked_bytes`` / ``max_compression_ratio``:
      DOCX, XLSX and PPTX are zip archives; their central directory is read
      first, and an archive over any of these is refused unopened (a zip
      bomb). The ratio applies to members over ``ratio_floor_bytes``
      unpacked: an ordinary document's XML deflates 10-30x (a sheet of
      numbers 12x, a Word document of one paragraph repeated 50,000 times
      290x), zeros about 1,000x; small parts may exceed it harmlessly.
    - ``max_cells``: a workbook's cells, all sheets together, counted in the
      sheets' XML before markitdown (pandas) reads it: 0.2-0.35 ms a cell
      (docs/files.md), so 100,000 cells take 20-35 s.
    - ``max_markup_bytes``: the most markup converted: an HTML page's bytes,
      or the XML parts of a DOCX, PPTX or XLSX, unpacked. markitdown turns
      markup into Markdown at 3-7 us a byte (docs/files.md): 8 MiB take
      25-55 s, within the time a reading has.
    """

    max_pages: int = 2_000
    time_budget_s: float = 60.0
    max_zip_members: int = 5_000
    max_unpacked_bytes: int = 256 * MIB
    max_compression_ratio: int = 500
    ratio_floor_bytes: int = 4 * MIB
    max_cells: int = 100_000
    max_markup_bytes: int = 8 * MIB


def clean_text(text: str) -> str:
    """Text that every database stores: no NUL characters (Postgres refuses
    them in text) and no lone surrogates (which are not UTF-8; a PDF's
    broken character map can produce them), each replaced by ``?``."""
    text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def bounded(text: str, max_chars: int, *, more: bool = False) -> DocumentText:
    """``text`` cut to ``max_chars``; ``more``: the source had text beyond it anyway."""
    text = clean_text(text)
    if len(text) > max_chars:
        return DocumentText(text=text[:max_chars], truncated=True)
    return DocumentText(text=text, truncated=more)


def size_text(n: int) -> str:
    """Bytes as a person reads them: 1.5 MB, 300 MB, 2.1 GB."""
    if n >= 1024 * MIB:
        return f"{n / (1024 * MIB):.1f} GB"
    if n >= MIB:
        return f"{n / MIB:.0f} MB" if n >= 10 * MIB else f"{n / MIB:.1f} MB"
    return f"{n / 1024:.0f} KB"
