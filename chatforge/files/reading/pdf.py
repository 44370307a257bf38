"""PDFs, read with pypdf a page at a time.

pypdf rather than markitdown's PDF converter (pdfminer): 1.2 s against
17.8 s for the same 100-page text PDF on the reference machine
(docs/files.md, "Reading documents"). pypdf also bounds every stream it
inflates (75 MB, ``pypdf.filters.ZLIB_MAX_OUTPUT_LENGTH``), so one page
cannot unpack a PDF bomb's gigabytes; the page cap and the time budget
bound the rest.
"""

from __future__ import annotations

import logging
import time

from pypdf import PasswordType, PdfReader
from pypdf.errors import DependencyError, PdfReadError, PyPdfError
from pypdf.generic import IndirectObject

from .result import DocumentText, ReadingLimits, UnreadableDocument, clean_text

# pypdf logs a warning for every repair it makes to a damaged file (dozens
# for one page): the outcome is what matters here, and it is recorded.
logging.getLogger("pypdf").setLevel(logging.ERROR)

# Between pages in the text: where a page starts, so the model can say
# "on page 12". About 12 characters a page.
PAGE_MARK = "[page {n}]"

_DAMAGED = ("The file is damaged: it is not a readable PDF ({detail}). Save or export it again as PDF from the "
            "program that made it and upload the new copy.")


def read_pdf(path: str, *, max_chars: int, limits: ReadingLimits) -> DocumentText:
    started = time.monotonic()
    try:
        reader = PdfReader(path)
    except (PdfReadError, PyPdfError, ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        raise UnreadableDocument(_DAMAGED.format(detail=_detail(exc))) from exc
    _decrypt(reader)
    _check_page_count(_declared_pages(reader), limits)
    try:
        pages = reader.pages
        count = len(pages)
    except (PdfReadError, PyPdfError, ValueError, KeyError, TypeError, IndexError, AttributeError,
            RecursionError) as exc:
        raise UnreadableDocument(_DAMAGED.format(detail=_detail(exc))) from exc
    _check_page_count(count, limits)  # the page tree itself, which can disagree with what it declared

    parts: list[str] = []
    length = 0
    truncated = False
    any_text = False
    for index in range(count):
        elapsed = time.monotonic() - started
        if elapsed > limits.time_budget_s:
            raise UnreadableDocument(
                f"Reading the PDF took longer than {limits.time_budget_s:g} s (stopped at page {index + 1:,} of "
                f"{count:,}): its pages are unusually costly to read. Split it, or print it to a new PDF, and "
                "upload it again."
            )
        try:
            page_text = clean_text(pages[index].extract_text() or "")
        except (PdfReadError, PyPdfError, ValueError, KeyError, TypeError, IndexError, AttributeError,
                RecursionError, ZeroDivisionError, OverflowError) as exc:
            raise UnreadableDocument(
                _DAMAGED.format(detail=f"page {index + 1:,} of {count:,} cannot be read: {_detail(exc)}")
            ) from exc
        any_text = any_text or bool(page_text.strip())
        block = f"{PAGE_MARK.format(n=index + 1)}\n{page_text.strip()}"
        if parts:
            block = "\n\n" + block
        if length + len(block) > max_chars:
            parts.append(block[:max_chars - length])
            truncated = True
            break
        parts.append(block)
        length += len(block)
    if not any_text:
        raise UnreadableDocument(
            f"The PDF's {count:,} page{'s' if count != 1 else ''} have no text to read (a scan, or only "
            "images): run text recognition (OCR) on it, or upload the pages as images."
        )
    return DocumentText(text="".join(parts), truncated=truncated, pages=count)


def _decrypt(reader: PdfReader) -> None:
    """A PDF encrypted with an empty user password (one that restricts
    printing or copying, which opens without a password) is read; one that
    needs a password to open is refused."""
    if not reader.is_encrypted:
        return
    try:
        opened = reader.decrypt("")
    except (DependencyError, NotImplementedError) as exc:
        raise UnreadableDocument(
            f"The PDF is encrypted with a method that cannot be read here ({_detail(exc)}): save it without "
            "encryption and upload it again."
        ) from exc
    except (PdfReadError, PyPdfError, ValueError, KeyError, TypeError) as exc:
        raise UnreadableDocument(_DAMAGED.format(detail=f"its encryption is damaged: {_detail(exc)}")) from exc
    if opened == PasswordType.NOT_DECRYPTED:
        raise UnreadableDocument(
            "The PDF is encrypted (password-protected): remove the password and upload it again."
        )


def _declared_pages(reader: PdfReader) -> int:
    """The page count the page tree declares, read without walking the tree
    (a PDF bomb declares, or holds, millions of pages)."""
    try:
        count = reader.trailer["/Root"]["/Pages"]["/Count"]
        if isinstance(count, IndirectObject):
            count = count.get_object()
        return max(int(count), 0)
    except (PdfReadError, PyPdfError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UnreadableDocument(_DAMAGED.format(detail=f"its page tree is missing: {_detail(exc)}")) from exc


def _detail(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text[:160]


def _check_page_count(count: int, limits: ReadingLimits) -> None:
    if count == 0:
        raise UnreadableDocument("The PDF has no pages: there is nothing in it to read.")
    if count > limits.max_pages:
        raise UnreadableDocument(
            f"The PDF has {count:,} pages, more than the {limits.max_pages:,} that can be read: split it "
            "and upload the part you need."
        )
