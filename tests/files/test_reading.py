"""Documents read to text (chatforge/files/reading/), on files each test
makes: PDFs written with pypdf (a content stream of text per page), DOCX
written as its zip of XML parts, XLSX with openpyxl, PPTX with python-pptx,
and the bad ones (encrypted, damaged, empty, bombs, over a cap, not UTF-8).

The generators here are also what ``bench/file_reading.py`` measures."""

from __future__ import annotations

import codecs
import io
import zipfile
from collections.abc import Sequence
from pathlib import Path

import openpyxl
import pptx
import pytest
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

from chatforge.files.reading import DocumentText, ReadingLimits, UnreadableDocument, read_document, readable_type
from chatforge.files.reading.formats import DOCX, PDF, PPTX, XLSX
from chatforge.files.reading.zips import count_cells

MIB = 1024 * 1024


# ---- documents, made here -------------------------------------------------

def _pdf_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf_bytes(pages: Sequence[str], *, user_password: str | None = None, owner_password: str = "owner") -> bytes:
    """A PDF with one page per string, its lines written in Helvetica
    (a page of text a PDF reader extracts as it was written)."""
    writer = PdfWriter()
    font = writer._add_object(DictionaryObject({
        NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
        NameObject("/BaseFont"): NameObject("/Helvetica"), NameObject("/Encoding"): NameObject("/WinAnsiEncoding"),
    }))
    for text in pages:
        page = writer.add_blank_page(width=612, height=792)
        ops = ["BT", "/F1 10 Tf", "12 TL", "50 750 Td"]
        ops += [f"({_pdf_string(line)}) Tj T*" for line in text.split("\n")]
        ops.append("ET")
        content = DecodedStreamObject()
        content.set_data("\n".join(ops).encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(content)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
    if user_password is not None:
        writer.encrypt(user_password=user_password, owner_password=owner_password, algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def text_pages(pages: int, *, lines: int = 45, words: int = 12) -> list[str]:
    """Pages of ordinary prose-like text: about 3,500 characters a page at the defaults."""
    vocabulary = ("the report shows revenue growth across every region while costs held steady "
                  "and the team expects further gains next quarter from new customers").split()
    result = []
    for p in range(pages):
        rows = []
        for line in range(lines):
            start = (p * lines + line) % len(vocabulary)
            rows.append(" ".join(vocabulary[(start + i) % len(vocabulary)] for i in range(words)))
        result.append(f"Page {p + 1} heading\n" + "\n".join(rows))
    return result


_W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
_CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/word/document.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
)
_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
    'officeDocument" Target="word/document.xml"/></Relationships>'
)


def _xml_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def docx_bytes(paragraphs: Sequence[str], *, table: Sequence[Sequence[str]] = ()) -> bytes:
    """A Word document: its paragraphs, then a table (rows of cells)."""
    body = "".join(f"<w:p><w:r><w:t xml:space=\"preserve\">{_xml_text(p)}</w:t></w:r></w:p>" for p in paragraphs)
    if table:
        rows = "".join(
            "<w:tr>" + "".join(f"<w:tc><w:p><w:r><w:t>{_xml_text(c)}</w:t></w:r></w:p></w:tc>" for c in row)
            + "</w:tr>" for row in table)
        body += f"<w:tbl>{rows}</w:tbl>"
    document = f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document {_W}><w:body>{body}</w:body></w:document>'
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", _CONTENT_TYPES)
        archive.writestr("_rels/.rels", _RELS)
        archive.writestr("word/document.xml", document)
    return out.getvalue()


def docx_with_zeros(path: Path, *, unpacked_mib: int) -> Path:
    """A zip bomb dressed as a Word document: an ordinary document plus one
    member of ``unpacked_mib`` MiB of zeros, streamed through the
    compressor a megabyte at a time (the file on disk is about a
    thousandth of that)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", _CONTENT_TYPES)
        archive.writestr("_rels/.rels", _RELS)
        archive.writestr("word/document.xml", f'<w:document {_W}><w:body><w:p><w:r><w:t>Hi</w:t></w:r></w:p>'
                                              "</w:body></w:document>")
        zeros = bytes(MIB)
        with archive.open("word/media/image1.bin", "w", force_zip64=True) as member:
            for _ in range(unpacked_mib):
                member.write(zeros)
    return path


def xlsx_bytes(sheets: dict[str, Sequence[Sequence[object]]]) -> bytes:
    workbook = openpyxl.Workbook(write_only=True)
    for title, rows in sheets.items():
        sheet = workbook.create_sheet(title)
        for row in rows:
            sheet.append(list(row))
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def grid(rows: int, columns: int) -> list[list[object]]:
    """A header row and ``rows - 1`` rows of numbers: ``rows * columns`` cells."""
    return [[f"col{c}" for c in range(columns)]] + [[r * columns + c for c in range(columns)] for r in range(1, rows)]


def pptx_bytes(slides: Sequence[tuple[str, str]]) -> bytes:
    """A presentation: a slide per (title, body)."""
    deck = pptx.Presentation()
    for title, body in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


@pytest.fixture
def write(tmp_path: Path):
    """Write bytes to a file of the test's own and return its path."""
    counter = iter(range(1000))

    def _write(data: bytes) -> str:
        path = tmp_path / f"document-{next(counter)}"
        path.write_bytes(data)
        return str(path)

    return _write


def read(path: str, content_type: str, *, max_chars: int = 100_000, **limits) -> DocumentText:
    return read_document(path, content_type, max_chars=max_chars, limits=ReadingLimits(**limits))


def refusal(path: str, content_type: str, **kwargs) -> str:
    with pytest.raises(UnreadableDocument) as caught:
        read(path, content_type, **kwargs)
    return caught.value.message


# ---- PDF ---------------------------------------------------------------------

def test_a_pdf_is_read_page_by_page_with_each_page_marked(write):
    path = write(pdf_bytes(["First page (with parentheses)\nsecond line", "Second page", "Third page"]))

    result = read(path, PDF)

    assert result.pages == 3
    assert result.truncated is False
    assert result.text.splitlines() == [
        "[page 1]", "First page (with parentheses)", "second line", "",
        "[page 2]", "Second page", "",
        "[page 3]", "Third page",
    ]


def test_a_long_pdf_stops_at_max_chars_and_says_it_was_cut(write):
    path = write(pdf_bytes(text_pages(5)))

    full = read(path, PDF)
    cut = read(path, PDF, max_chars=5_000)

    assert len(full.text) > 5_000 and full.truncated is False
    assert cut.truncated is True
    assert cut.text == full.text[:5_000]


def test_a_password_protected_pdf_is_refused_with_what_to_do(write):
    path = write(pdf_bytes(["Secret plans"], user_password="hunter2"))

    assert refusal(path, PDF) == "The PDF is encrypted (password-protected): remove the password and upload it again."


def test_a_pdf_encrypted_only_against_changes_opens_without_a_password_and_is_read(write):
    # An empty user password: readers open it at once; only the owner's
    # permissions (printing, copying) are locked.
    path = write(pdf_bytes(["Open to read"], user_password=""))

    assert read(path, PDF).text == "[page 1]\nOpen to read"


@pytest.mark.parametrize("data", [
    b"%PDF-1.7\n" + bytes(range(256)) * 16,  # a header, then noise
    b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n",  # cut off after its first object
], ids=["noise", "cut-short"])
def test_a_damaged_pdf_is_refused_as_damaged(write, data):
    message = refusal(write(data), PDF)

    assert message.startswith("The file is damaged: it is not a readable PDF (")
    assert "upload the new copy" in message


def test_the_first_half_of_a_real_pdf_is_refused_as_damaged(write):
    data = pdf_bytes(text_pages(4))

    assert refusal(write(data[: len(data) // 2]), PDF).startswith("The file is damaged: it is not a readable PDF")


def test_a_pdf_with_no_pages_is_refused(write):
    assert refusal(write(pdf_bytes([])), PDF) == "The PDF has no pages: there is nothing in it to read."


def test_a_pdf_with_pages_but_no_text_says_it_needs_text_recognition(write):
    message = refusal(write(pdf_bytes(["", ""])), PDF)

    assert message.startswith("The PDF's 2 pages have no text to read (a scan, or only images)")


def test_a_pdf_over_the_page_cap_is_refused_before_a_page_is_read(write):
    message = refusal(write(pdf_bytes(["a", "b", "c"])), PDF, max_pages=2)

    assert message == ("The PDF has 3 pages, more than the 2 that can be read: split it and upload the part "
                       "you need.")


def test_a_pdf_that_outlasts_its_time_budget_is_refused_naming_where_it_stopped(write):
    # A budget of zero is spent before the first page: the check between pages stops it there.
    message = refusal(write(pdf_bytes(["a", "b"])), PDF, time_budget_s=0)

    assert message.startswith("Reading the PDF took longer than 0 s (stopped at page 1 of 2)")


def test_the_default_page_cap_and_budget(write):
    limits = ReadingLimits()
    assert (limits.max_pages, limits.time_budget_s) == (2_000, 60.0)


# ---- DOCX, XLSX, PPTX, HTML (markitdown) -------------------------------------

def test_a_word_document_becomes_markdown_with_its_table(write):
    path = write(docx_bytes(["Quarterly report", "Revenue grew & costs fell."],
                            table=[["Region", "Sales"], ["North", "120"], ["South", "95"]]))

    result = read(path, DOCX)

    assert result.truncated is False and result.pages is None
    assert "Quarterly report" in result.text
    assert "Revenue grew & costs fell." in result.text
    lines = [line.replace(" ", "") for line in result.text.splitlines()]
    assert "|Region|Sales|" in lines and "|North|120|" in lines and "|South|95|" in lines


def test_a_word_document_is_cut_at_max_chars(write):
    path = write(docx_bytes([f"Paragraph number {i} of the document." for i in range(200)]))

    result = read(path, DOCX, max_chars=300)

    assert result.truncated is True and len(result.text) == 300
    assert result.text.startswith("Paragraph number 0 of the document.")


def test_a_spreadsheet_becomes_a_table_per_sheet(write):
    path = write(xlsx_bytes({"Sales": [["Region", "Total"], ["North", 120], ["South", 95]],
                             "Notes": [["Remember the audit"]]}))

    text = read(path, XLSX).text

    assert "## Sales" in text and "## Notes" in text
    lines = [line.replace(" ", "") for line in text.splitlines()]
    assert "|Region|Total|" in lines and "|North|120|" in lines and "|South|95|" in lines
    assert "Remember the audit" in text


def test_a_spreadsheet_over_the_cell_cap_is_refused_before_it_is_converted(write):
    path = write(xlsx_bytes({"Big": grid(20, 10), "More": grid(5, 4)}))  # 200 + 20 cells

    message = refusal(path, XLSX, max_cells=150)

    assert message.startswith("The spreadsheet has more than 150 cells, the most that can be read as text")
    assert read(path, XLSX, max_cells=220).text  # at the cap it is read


def test_cells_are_counted_exactly_across_the_chunks_the_sheet_is_streamed_in(write):
    # About 40 bytes of XML a cell: 60,000 cells are over 2 MiB, read a MiB at a time.
    path = write(xlsx_bytes({"Numbers": grid(6_000, 10)}))

    with zipfile.ZipFile(path) as archive:
        assert archive.getinfo("xl/worksheets/sheet1.xml").file_size > 2 * MIB
        assert count_cells(archive, stop_after=10**9) == 60_000
        # Past the bound it stops, after the chunk that crossed it.
        assert 1_000 < count_cells(archive, stop_after=1_000) < 60_000


def test_an_office_document_with_more_markup_than_can_be_converted_in_time_is_refused(write):
    path = write(docx_bytes([f"Paragraph number {i} of a long document." for i in range(400)]))

    message = refusal(path, DOCX, max_markup_bytes=10_240)

    assert message.startswith("The Word document (DOCX) holds ")
    assert message.endswith("of text and markup, more than the 10 KB that can be read in the time a file has: "
                            "split it into smaller documents and upload the part you need.")


def test_the_default_caps_on_cells_and_markup():
    limits = ReadingLimits()
    assert (limits.max_cells, limits.max_markup_bytes) == (100_000, 8 * MIB)


def test_a_presentation_gives_each_slide_its_text(write):
    path = write(pptx_bytes([("Roadmap", "Ship the files feature"), ("Risks", "Zip bombs")]))

    text = read(path, PPTX).text

    assert "<!-- Slide number: 1 -->" in text and "<!-- Slide number: 2 -->" in text
    for words in ("Roadmap", "Ship the files feature", "Risks", "Zip bombs"):
        assert words in text


def test_an_html_page_becomes_markdown_without_its_scripts(write):
    page = ("<html><head><title>T</title><script>alert('x')</script><style>p {color: red}</style></head>"
            "<body><h1>Report</h1><p>Hello <b>world</b>, caf\u00e9.</p><ul><li>one</li><li>two</li></ul></body></html>")
    text = read(write(page.encode()), "text/html").text

    assert "# Report" in text
    assert "Hello **world**, caf\u00e9." in text
    assert "* one" in text or "- one" in text
    assert "alert" not in text and "color" not in text


def test_an_html_page_over_the_markup_cap_is_refused(write):
    message = refusal(write(b"<p>" + b"x" * 3000 + b"</p>"), "text/html", max_markup_bytes=2048)

    assert message.startswith("The HTML page is 3 KB, more than the 2 KB that can be read as a page")


# ---- zip bombs and damaged archives -------------------------------------------

def test_a_zip_bomb_docx_is_refused_from_its_central_directory(tmp_path):
    path = docx_with_zeros(tmp_path / "bomb.docx", unpacked_mib=300)
    assert path.stat().st_size < MIB  # 300 MiB declared, a few hundred KB stored

    message = refusal(str(path), DOCX)

    assert message.startswith("The Word document (DOCX) unpacks to 300 MB, more than the 256 MB that can be read "
                              "(it may be a zip bomb)")


def test_one_member_compressed_beyond_any_document_is_refused_as_a_bomb(tmp_path):
    # 8 MiB of zeros: under the size cap, but about a thousand times smaller stored.
    path = docx_with_zeros(tmp_path / "dense.docx", unpacked_mib=8)

    message = refusal(str(path), DOCX)

    assert message.startswith("The Word document (DOCX) has a part (word/media/image1.bin) that unpacks ")
    assert "it looks like a zip bomb and is not read" in message


def test_an_archive_of_too_many_parts_is_refused(write):
    path = write(xlsx_bytes({f"S{i}": [[i]] for i in range(5)}))

    message = refusal(path, XLSX, max_zip_members=4)

    assert message.startswith("The spreadsheet (XLSX) has ")
    assert "parts inside, more than the 4 that can be read" in message


@pytest.mark.parametrize("content_type", [DOCX, XLSX, PPTX])
def test_an_office_document_that_is_not_a_zip_is_refused_as_damaged(write, content_type):
    message = refusal(write(b"PK\x03\x04 but nothing after the signature"), content_type)

    assert message.startswith("The file is damaged: it is not a readable ")
    assert "Save it again from the program that made it" in message


def test_a_zip_whose_parts_are_not_a_word_document_is_refused_as_damaged(write):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("[Content_Types].xml", _CONTENT_TYPES)
        archive.writestr("word/document.xml", "<not-word>")
    message = refusal(write(out.getvalue()), DOCX)

    assert message.startswith("The file is damaged: it could not be read as a Word document (DOCX) (")


# ---- text as it is -------------------------------------------------------------

def test_utf8_text_is_kept_as_it_is(write):
    text = "Caf\u00e9 \u65e5\u672c\u8a9e \U0001F600\r\nline two\n"
    assert read(write(text.encode()), "text/plain") == DocumentText(text=text, truncated=False)


def test_csv_stays_csv(write):
    data = 'name,amount,note\n"Smith, J",12.50,"said ""hi"""\nLee,7,\n'
    assert read(write(data.encode()), "text/csv").text == data


@pytest.mark.parametrize("content_type", ["text/markdown", "text/x-python", "application/json",
                                          "text/plain; charset=utf-8"])
def test_markdown_code_and_json_are_text(write, content_type):
    assert read(write(b"# Title\nprint('x')\n"), content_type).text == "# Title\nprint('x')\n"


@pytest.mark.parametrize("bom, codec", [(codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
                                        (codecs.BOM_UTF16_BE, "utf-16-be")], ids=["utf-8", "utf-16-le", "utf-16-be"])
def test_a_byte_order_mark_is_honoured_and_dropped(write, bom, codec):
    assert read(write(bom + "Stra\u00dfe".encode(codec)), "text/plain").text == "Stra\u00dfe"


def test_text_that_is_not_utf8_is_refused_naming_the_byte(write):
    message = refusal(write("Gr\u00fc\u00dfe".encode("latin-1")), "text/plain")

    assert message.startswith("The file is not UTF-8 text: the byte at position 2 is not valid UTF-8. Save it as UTF-8")


def test_an_invalid_byte_past_the_first_chunk_is_placed_exactly(write):
    # The first MiB ends inside a two-byte character, which the next chunk completes.
    data = b"a" * (MIB - 1) + "\u00e9".encode() + b"ok \xff"
    assert refusal(write(data), "text/plain", max_chars=2 * MIB).startswith(
        f"The file is not UTF-8 text: the byte at position {MIB + 4:,} is not valid UTF-8.")


def test_a_character_split_between_chunks_is_decoded_whole(write):
    data = b"a" * (MIB - 1) + "\u00e9".encode() + b"end"
    text = read(write(data), "text/plain", max_chars=2 * MIB).text
    assert text.endswith("a\u00e9end") and len(text) == MIB + 3


def test_text_with_nul_characters_is_refused_as_binary(write):
    assert refusal(write(b"looks like text\x00\x00\x01\x02"), "text/plain").startswith(
        "The file holds NUL characters, so it is binary data rather than text")


def test_text_stops_at_max_chars_without_reading_the_rest(write):
    # Past the chunk (a MiB) that reaches max_chars the file is not read:
    # an invalid byte beyond it never refuses the file.
    data = "\u00e9".encode() * 10 + b"a" * MIB + b"\xff"
    assert read(write(data), "text/plain", max_chars=10) == DocumentText(text="\u00e9" * 10, truncated=True)
    assert read(write(b"x" * 10), "text/plain", max_chars=10) == DocumentText(text="x" * 10, truncated=False)


def test_an_empty_text_file_reads_as_no_text(write):
    assert read(write(b""), "text/plain") == DocumentText(text="", truncated=False)


# ---- what is read ---------------------------------------------------------------

def test_types_that_are_not_documents_are_refused_by_name(write):
    message = refusal(write(b"\x89PNG\r\n"), "image/png")

    assert message.startswith("Files of type image/png are not read as text.")


def test_readable_types():
    for content_type in (PDF, DOCX, XLSX, PPTX, "text/html", "text/csv", "text/plain", "text/x-rust",
                         "application/json", "application/vnd.api+json", "TEXT/PLAIN; charset=utf-8"):
        assert readable_type(content_type), content_type
    for content_type in ("image/png", "application/zip", "application/octet-stream", ""):
        assert not readable_type(content_type), content_type
