"""What a file is, told by its bytes: never by its name or the type a
client declares, both of which anyone can set to anything.

Binary formats are recognised by their signatures (``filetype``): PNG,
JPEG, GIF and WebP are images; PDF is a document; a ZIP archive is a
document only when its members say it is a Word, Excel or PowerPoint file
(DOCX, XLSX and PPTX are ZIPs; any other ZIP is refused). A file with no
known signature whose bytes are all UTF-8 text (no NUL) is a text document;
only then does its extension choose among the text types (Markdown, CSV,
HTML, code), and it is served as ``text/plain`` whatever that type is. A
wrong extension never changes what the bytes are. SVG is text here, never
an image: it can carry script.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from typing import BinaryIO

import filetype

from chatforge.errors import UnsupportedFileType

from .models import StoredFile
from .names import extension_of

# How many leading bytes the signatures need (filetype reads up to 8 KiB;
# its matchers look at most at the first 262).
HEAD_BYTES = 8192

IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}
PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
# The member that makes an Office Open XML package each kind of document.
_OFFICE_MAIN_PARTS = (("word/document.xml", DOCX), ("xl/workbook.xml", XLSX), ("ppt/presentation.xml", PPTX))
_ZIP_SIGNATURES = (b"PK\x03\x04",)
# filetype's name for an animated PNG, which is a PNG to everything that shows one.
_SAME_AS = {"image/apng": "image/png"}

TEXT_PLAIN = "text/plain"
# A text file's type, by its extension; any other extension (or none) is text/plain.
TEXT_TYPES_BY_EXTENSION = {
    "md": "text/markdown", "markdown": "text/markdown",
    "csv": "text/csv", "tsv": "text/tab-separated-values",
    "html": "text/html", "htm": "text/html",
    "py": "text/x-python", "js": "text/x-javascript", "mjs": "text/x-javascript", "ts": "text/x-typescript",
    "java": "text/x-java", "c": "text/x-c", "h": "text/x-c", "cc": "text/x-c++", "cpp": "text/x-c++",
    "hpp": "text/x-c++", "cs": "text/x-csharp", "go": "text/x-go", "rs": "text/x-rust", "rb": "text/x-ruby",
    "php": "text/x-php", "sh": "text/x-shellscript", "sql": "text/x-sql", "kt": "text/x-kotlin",
    "swift": "text/x-swift",
}
# What is taken, as the 415 lists it.
ACCEPTED = [
    "image/png", "image/jpeg", "image/gif", "image/webp", PDF, DOCX, XLSX, PPTX,
    "UTF-8 text (plain, Markdown, CSV, HTML, code)",
]


@dataclass(frozen=True)
class Sniffed:
    content_type: str
    kind: str  # StoredFile.Kind

    @property
    def is_text(self) -> bool:
        return self.content_type.startswith("text/")


def sniff(*, head: bytes, stream: BinaryIO, utf8_text: bool, name: str) -> Sniffed:
    """The type and kind of a file whose first bytes are ``head``.

    ``stream`` is the whole file, seekable (a ZIP's members are read from its
    central directory, at the end); ``utf8_text`` says whether every byte of
    it decoded as UTF-8 with no NUL. Raises UnsupportedFileType for anything
    else, naming what the bytes look like."""
    guessed = filetype.guess(head) if head else None
    mime = _SAME_AS.get(guessed.mime, guessed.mime) if guessed is not None else None
    if mime in IMAGE_TYPES:
        return Sniffed(mime, StoredFile.Kind.IMAGE)
    if mime == PDF:
        return Sniffed(PDF, StoredFile.Kind.DOCUMENT)
    if head.startswith(_ZIP_SIGNATURES):
        return Sniffed(_office_type(stream), StoredFile.Kind.DOCUMENT)
    if utf8_text:
        # Some text formats have a signature of their own (RTF, PostScript):
        # their bytes are still text, and are taken as such.
        return Sniffed(TEXT_TYPES_BY_EXTENSION.get(extension_of(name), TEXT_PLAIN), StoredFile.Kind.DOCUMENT)
    what = mime or "binary data of no known type"
    raise _unsupported(what)


def _office_type(stream: BinaryIO) -> str:
    """DOCX, XLSX or PPTX, by the package's main part; anything else in a ZIP is refused."""
    stream.seek(0)
    try:
        with zipfile.ZipFile(stream) as archive:
            members = set(archive.namelist())
    except (zipfile.BadZipFile, ValueError, OSError):
        raise _unsupported("a damaged ZIP archive") from None
    finally:
        stream.seek(0)
    if "[Content_Types].xml" in members:
        for part, content_type in _OFFICE_MAIN_PARTS:
            if part in members:
                return content_type
    raise _unsupported("a ZIP archive (not a Word, Excel or PowerPoint file)")


def _unsupported(what: str) -> UnsupportedFileType:
    return UnsupportedFileType(
        f"This file's contents are {what}, which is not taken. Files taken: images (PNG, JPEG, GIF, WebP), "
        "PDF, Word (DOCX), Excel (XLSX), PowerPoint (PPTX), and UTF-8 text (plain, Markdown, CSV, HTML, code). "
        "The type is read from the contents: renaming a file does not change it.",
        details={"sniffed_as": what, "accepted": ACCEPTED},
    )
