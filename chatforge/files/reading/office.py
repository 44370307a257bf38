"""DOCX, XLSX, PPTX and HTML, read to Markdown by markitdown's converter
for each type (called directly: markitdown's ``MarkItDown`` would try its
whole list of converters and plugins on every file).

Markdown keeps what a model needs of these formats: headings, lists and
tables (a sheet becomes a table under its name, a slide is marked with its
number). Archives are checked before any converter opens them
(``zips.py``), and a workbook's cells are counted first: markitdown reads a
sheet through pandas and renders it as HTML and then Markdown, about
0.2 ms a cell (docs/files.md).
"""

from __future__ import annotations

import os

from markitdown import StreamInfo
from markitdown.converters import DocxConverter, HtmlConverter, PptxConverter, XlsxConverter

from .formats import DOCX, LABELS, PPTX, XLSX
from .result import DocumentText, ReadingLimits, UnreadableDocument, bounded, size_text
from .zips import count_cells, open_checked_zip

_BY_TYPE = {DOCX: (".docx", DocxConverter), XLSX: (".xlsx", XlsxConverter), PPTX: (".pptx", PptxConverter)}


def read_office(path: str, content_type: str, *, max_chars: int, limits: ReadingLimits) -> DocumentText:
    extension, converter = _BY_TYPE[content_type]
    with open_checked_zip(path, label=LABELS[content_type], limits=limits) as archive:
        if content_type == XLSX:
            cells = count_cells(archive, stop_after=limits.max_cells)
            if cells > limits.max_cells:
                raise UnreadableDocument(
                    f"The spreadsheet has more than {limits.max_cells:,} cells, the most that can be read as "
                    "text: keep the sheets and rows you need (or save them as CSV, which is read as it is) "
                    "and upload that."
                )
    with open(path, "rb") as stream:
        result = converter().convert(stream, StreamInfo(mimetype=content_type, extension=extension))
    return bounded(result.markdown or "", max_chars)


def read_html(path: str, *, charset: str | None, max_chars: int, limits: ReadingLimits) -> DocumentText:
    size = os.path.getsize(path)
    if size > limits.max_markup_bytes:
        raise UnreadableDocument(
            f"The HTML page is {size_text(size)}, more than the {size_text(limits.max_markup_bytes)} that can "
            "be read as a page: save its text (or the part you need) and upload that."
        )
    with open(path, "rb") as stream:
        result = HtmlConverter().convert(stream, StreamInfo(mimetype="text/html", extension=".html",
                                                            charset=charset or "utf-8"))
    return bounded(result.markdown or "", max_chars)
