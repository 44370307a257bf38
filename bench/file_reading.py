"""How long documents take to read to text: `python -m bench.file_reading`.

Reads generated documents with the converters the ``chatforge.read_file_text``
task uses (``chatforge/files/reading/``, no Django, no worker: the
conversion alone, in this process) and prints the time of each, the best
and the median of ``--repeat`` reads (after one read of a small document
of each kind, which pays the imports):

- a 100-page text PDF (about 3,500 characters a page), with pypdf
  (markitdown's PDF converter, pdfminer, is not installed: its extra is
  left out of requirements.txt, see docs/files.md);
- DOCX documents of 4,000 and 32,000 paragraphs (0.8 and 6.4 MiB of XML)
  and an HTML page, whose cost per byte of markup sets the markup cap
  (``ReadingLimits.max_markup_bytes``, 8 MiB);
- XLSX workbooks of 10,000 to 100,000 cells, whose cost per cell sets the
  cell cap (``ReadingLimits.max_cells``, 100,000);
- a PPTX of 50 slides; a 300 MiB zip bomb's refusal.

The figures move with the machine's load; docs/files.md ("Reading
documents") records a run. Nothing here is a target.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

from chatforge.files.reading import ReadingLimits, UnreadableDocument, read_document
from chatforge.files.reading.formats import DOCX, PDF, PPTX, XLSX
from tests.files.test_reading import (
    docx_bytes,
    docx_with_zeros,
    grid,
    pdf_bytes,
    pptx_bytes,
    text_pages,
    xlsx_bytes,
)

MAX_CHARS = 2_000_000  # CHATFORGE_FILE_TEXT_MAX_CHARS's default
MIB = 1024 * 1024
XLSX_COLUMNS = 10


def _sizes(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def prose(paragraphs: int) -> list[str]:
    """Paragraphs of about 140 characters, each a little different."""
    return [f"Paragraph {i}: " + " ".join(text_pages(1, lines=1, words=20)[0].splitlines()[1:]) + f" ({i})"
            for i in range(paragraphs)]


def timed(read: Callable[[], object], repeat: int) -> tuple[float, float, object]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = read()
        times.append(time.perf_counter() - started)
    return min(times), statistics.median(times), result


def line(what: str, size: str, best: float, median: float, detail: str) -> None:
    print(f"{what:<34} {size:>11} {_seconds(best):>10} {_seconds(median):>10}   {detail}")


def _seconds(s: float) -> str:
    if s < 0.001:
        return f"{s * 1e6:.0f} us"
    return f"{s * 1000:.1f} ms" if s < 1 else f"{s:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed reads of each document (after a warm-up)")
    parser.add_argument("--cells", type=_sizes, default="10000,50000,100000",
                        help="XLSX sizes to time, in cells (comma-separated)")
    parser.add_argument("--paragraphs", type=_sizes, default="4000,32000",
                        help="DOCX sizes to time, in paragraphs of about 140 characters (comma-separated)")
    args = parser.parse_args()
    # The caps off, to time documents at and past them.
    unlimited = ReadingLimits(max_cells=10**9, max_markup_bytes=10**12, max_pages=10**9, time_budget_s=10**6)
    workdir = Path(tempfile.mkdtemp(prefix="chatforge-bench-reading-"))

    def write(name: str, data: bytes) -> str:
        path = workdir / name
        path.write_bytes(data)
        return str(path)

    warm_up = ReadingLimits()
    for data, content_type in ((pdf_bytes(["warm-up"]), PDF), (docx_bytes(["warm-up"]), DOCX),
                               (xlsx_bytes({"S": [[1]]}), XLSX), (pptx_bytes([("warm", "up")]), PPTX)):
        read_document(write("warm-up", data), content_type, max_chars=MAX_CHARS, limits=warm_up)

    print(f"{'document':<34} {'bytes':>11} {'best':>10} {'median':>10}   result")

    pdf = write("100-pages.pdf", pdf_bytes(text_pages(100)))
    best, median, result = timed(lambda: read_document(pdf, PDF, max_chars=MAX_CHARS), args.repeat)
    line("PDF, 100 pages of text (pypdf)", f"{Path(pdf).stat().st_size:,}", best, median,
         f"{len(result.text):,} characters, {best / 100 * 1000:.1f} ms a page")

    for paragraphs in args.paragraphs:
        docx = write(f"{paragraphs}-paragraphs.docx", docx_bytes(prose(paragraphs)))
        with zipfile.ZipFile(docx) as archive:
            xml = archive.getinfo("word/document.xml").file_size
        best, median, result = timed(lambda: read_document(docx, DOCX, max_chars=10**9, limits=unlimited),
                                     args.repeat)
        line(f"DOCX, {paragraphs:,} paragraphs", f"{Path(docx).stat().st_size:,}", best, median,
             f"{len(result.text):,} characters from {xml / MIB:.1f} MiB of XML, {best / xml * 1e6:.1f} us a byte")

    page = ("<html><body>" + "".join(f"<h2>Part {i}</h2><p>{text}</p>" for i, text in enumerate(prose(5_000)))
            + "</body></html>").encode()
    html = write("page.html", page)
    best, median, result = timed(lambda: read_document(html, "text/html", max_chars=10**9, limits=unlimited),
                                 args.repeat)
    line("HTML, 5,000 headed paragraphs", f"{len(page):,}", best, median,
         f"{len(result.text):,} characters, {best / len(page) * 1e6:.1f} us a byte")

    for cells in args.cells:
        xlsx = write(f"{cells}-cells.xlsx", xlsx_bytes({"Data": grid(cells // XLSX_COLUMNS, XLSX_COLUMNS)}))
        best, median, result = timed(lambda: read_document(xlsx, XLSX, max_chars=10**9, limits=unlimited),
                                     args.repeat)
        line(f"XLSX, {cells:,} cells ({XLSX_COLUMNS} columns)", f"{Path(xlsx).stat().st_size:,}", best, median,
             f"{len(result.text):,} characters, {best / cells * 1e6:.0f} us a cell")

    deck = write("50-slides.pptx", pptx_bytes([(f"Slide {i}", f"Point {i}: the numbers went up") for i in range(50)]))
    best, median, result = timed(lambda: read_document(deck, PPTX, max_chars=MAX_CHARS), args.repeat)
    line("PPTX, 50 slides", f"{Path(deck).stat().st_size:,}", best, median, f"{len(result.text):,} characters")

    bomb = str(docx_with_zeros(workdir / "bomb.docx", unpacked_mib=300))

    def refuse() -> str:
        try:
            read_document(bomb, DOCX, max_chars=MAX_CHARS)
        except UnreadableDocument as exc:
            return exc.message
        raise AssertionError("the zip bomb was read")

    best, median, message = timed(refuse, args.repeat)
    line("DOCX zip bomb, 300 MiB unpacked", f"{Path(bomb).stat().st_size:,}", best, median, "refused: "
         + message[:60] + "…")


if __name__ == "__main__":
    main()
