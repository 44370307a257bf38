"""Documents read to text: the converters behind the ``chatforge.read_file_text``
task (``chatforge/files/text.py``), with no Django in them, so they can be
tested and measured alone (``bench/file_reading.py``).

``read_document(path, content_type, max_chars=…)`` reads the file at
``path`` as the (sniffed) ``content_type`` says:

- PDF: pypdf, page by page (``pdf.py``);
- DOCX, XLSX, PPTX, HTML: markitdown's converter for the type, to Markdown
  (``office.py``), zip archives checked first (``zips.py``);
- CSV, plain text, Markdown, code, JSON, XML, YAML…: UTF-8 as it is (``plain.py``).

It returns at most ``max_chars`` characters (``truncated`` says there was
more) or raises ``UnreadableDocument`` with a message for the person who
uploaded the file. ``ReadingLimits`` holds the bounds against bombs and
runaway files; docs/files.md, "Reading documents", lists them.
"""

from __future__ import annotations

import logging

from .formats import DOCX, HTML, LABELS, PDF, PPTX, XLSX, is_text, label
from .pdf import read_pdf
from .plain import read_plain
from .result import DocumentText, ReadingLimits, UnreadableDocument

__all__ = ["DocumentText", "ReadingLimits", "UnreadableDocument", "read_document", "readable_type"]

logger = logging.getLogger(__name__)


def readable_type(content_type: str) -> bool:
    """Whether ``read_document`` reads this type (its parameters ignored)."""
    media_type, _ = _parse(content_type)
    return media_type in LABELS or media_type in HTML or is_text(media_type)


def read_document(path: str, content_type: str, *, max_chars: int,
                  limits: ReadingLimits = ReadingLimits()) -> DocumentText:
    """The text of the document at ``path``. Any failure (an ``Exception``)
    of a converter on the file is an ``UnreadableDocument``: a converter's
    own error on a damaged file is as much the file's fault as a refusal of
    ours. A caller's interruption (a BaseException: its time limit) passes
    through."""
    if max_chars < 0:
        raise ValueError("max_chars must not be negative")
    media_type, charset = _parse(content_type)
    name = label(media_type)
    try:
        return _read(path, media_type, charset, max_chars=max_chars, limits=limits)
    except UnreadableDocument:
        raise
    except MemoryError as exc:
        raise UnreadableDocument(
            f"The {name} is too large to read in the memory a worker has: split it into smaller files and "
            "upload them."
        ) from exc
    except Exception as exc:
        logger.warning("reading a %s failed: %s: %s", media_type, type(exc).__name__, exc)
        detail = (str(exc).strip() or type(exc).__name__)[:160]
        raise UnreadableDocument(
            f"The file is damaged: it could not be read as a {name} ({detail}). Save it again from the "
            "program that made it and upload the new copy."
        ) from exc


def _read(path: str, media_type: str, charset: str | None, *, max_chars: int,
          limits: ReadingLimits) -> DocumentText:
    if media_type == PDF:
        return read_pdf(path, max_chars=max_chars, limits=limits)
    if media_type in (DOCX, XLSX, PPTX) or media_type in HTML:
        # Imported here, not above: markitdown's package pulls in magika,
        # onnxruntime and pandas (0.8 s and tens of MB), which only the
        # worker reading an office document or HTML page needs; a web
        # process imports this package to schedule a reading.
        from .office import read_html, read_office

        if media_type in HTML:
            return read_html(path, charset=charset, max_chars=max_chars, limits=limits)
        return read_office(path, media_type, max_chars=max_chars, limits=limits)
    if is_text(media_type):
        return read_plain(path, max_chars=max_chars)
    raise UnreadableDocument(
        f"Files of type {media_type or 'unknown'} are not read as text. Upload a PDF, a Word document, a "
        "spreadsheet, a presentation, HTML, CSV or plain text (Markdown and code included)."
    )


def _parse(content_type: str) -> tuple[str, str | None]:
    """``text/html; charset=ISO-8859-1`` -> ``("text/html", "ISO-8859-1")``."""
    media_type, _, params = content_type.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip('"')
    return media_type.strip().lower(), charset
