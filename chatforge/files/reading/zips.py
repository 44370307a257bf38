"""DOCX, XLSX and PPTX are zip archives: checked from their central
directory before anything is unpacked, so a zip bomb (a small file that
unpacks to gigabytes) is refused in milliseconds, as is a document with
more markup than can be converted in time; a workbook's cells are counted
in its sheets' XML before a converter builds them in memory.

Python's ``zipfile`` never unpacks more than a member's declared size (a
member that claims less than it holds fails its CRC check when read), so
the declared sizes checked here bound what the converters can unpack.
"""

from __future__ import annotations

import re
import zipfile

from .result import ReadingLimits, UnreadableDocument, size_text

_CHUNK = 1024 * 1024
# Longer than any cell tag's start ("<" + a namespace prefix + "c" + one character).
_TAG_TAIL = 64
# A cell element of a sheet's XML: <c r="A1" …>, <c>, or with a namespace prefix (<x:c …>).
_CELL = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?c[\s/>]")


def open_checked_zip(path: str, *, label: str, limits: ReadingLimits) -> zipfile.ZipFile:
    """The archive at ``path``, opened after its central directory passed the
    limits; raises UnreadableDocument saying which one it did not."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
        raise UnreadableDocument(
            f"The file is damaged: it is not a readable {label} (a {label} is a zip archive, and this one "
            f"cannot be opened: {exc}). Save it again from the program that made it and upload the new copy."
        ) from exc
    try:
        _check_directory(archive.infolist(), label=label, limits=limits)
    except UnreadableDocument:
        archive.close()
        raise
    return archive


def _check_directory(members: list[zipfile.ZipInfo], *, label: str, limits: ReadingLimits) -> None:
    if len(members) > limits.max_zip_members:
        raise UnreadableDocument(
            f"The {label} has {len(members):,} parts inside, more than the {limits.max_zip_members:,} that "
            "can be read: it is not an ordinary document (a zip bomb?)."
        )
    unpacked = sum(m.file_size for m in members)
    if unpacked > limits.max_unpacked_bytes:
        raise UnreadableDocument(
            f"The {label} unpacks to {size_text(unpacked)}, more than the {size_text(limits.max_unpacked_bytes)} "
            "that can be read (it may be a zip bomb): split it into smaller documents, or remove large "
            "embedded media, and upload it again."
        )
    markup = sum(m.file_size for m in members if m.filename.endswith((".xml", ".rels")))
    if markup > limits.max_markup_bytes:
        raise UnreadableDocument(
            f"The {label} holds {size_text(markup)} of text and markup, more than the "
            f"{size_text(limits.max_markup_bytes)} that can be read in the time a file has: split it into "
            "smaller documents and upload the part you need."
        )
    for member in members:
        if member.file_size <= limits.ratio_floor_bytes:
            continue
        ratio = member.file_size / max(member.compress_size, 1)
        if ratio > limits.max_compression_ratio:
            raise UnreadableDocument(
                f"The {label} has a part ({member.filename[:80]}) that unpacks {ratio:,.0f} times larger than it "
                f"is stored ({size_text(member.compress_size)} to {size_text(member.file_size)}), beyond the "
                f"{limits.max_compression_ratio}x an ordinary document reaches: it looks like a zip bomb and "
                "is not read."
            )


def count_cells(archive: zipfile.ZipFile, *, stop_after: int) -> int:
    """The cells in a workbook's sheets (every ``<c>`` element of
    ``xl/worksheets/*.xml``), streamed a megabyte at a time; stops counting
    once past ``stop_after``. Counted rather than taken from a sheet's
    ``<dimension>``, which a file may leave out or misstate."""
    total = 0
    for member in archive.infolist():
        name = member.filename
        if not (name.startswith("xl/worksheets/") and name.endswith(".xml")):
            continue
        with archive.open(member) as xml:
            rest = b""
            while True:
                chunk = xml.read(_CHUNK)
                if not chunk:
                    total += len(_CELL.findall(rest))
                    break
                data = rest + chunk
                # A tag cut by the chunk's end is counted with the next chunk:
                # keep the chunk's last "<" back when it is near the end.
                cut = data.rfind(b"<", max(0, len(data) - _TAG_TAIL))
                scan, rest = (data[:cut], data[cut:]) if cut >= 0 else (data, b"")
                total += len(_CELL.findall(scan))
                if total > stop_after:
                    return total
    return total
