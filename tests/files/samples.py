"""Small files of each kind, made from their formats' signatures (and, for
the Office formats, the ZIP members that make them what they are)."""

from __future__ import annotations

import io
import zipfile

from tests.support.files import PNG_BYTES

PNG = PNG_BYTES
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00" + b"\x00" * 64 + b"\xff\xd9"
GIF = (b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,"
       b"\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")
_WEBP_BODY = b"WEBPVP8 " + (10).to_bytes(4, "little") + b"\x00" * 10
WEBP = b"RIFF" + len(_WEBP_BODY).to_bytes(4, "little") + _WEBP_BODY
PDF = b"%PDF-1.4\n1 0 obj <</Type /Catalog>> endobj\ntrailer <</Root 1 0 R>>\n%%EOF\n"
MP4 = b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom" + b"\x00" * 64
ELF = b"\x7fELF\x02\x01\x01" + b"\x00" * 57
UNKNOWN_BINARY = bytes(range(256)) * 4
LATIN1_TEXT = "Café crème, déjà vu.\n".encode("latin-1")
TEXT = "Notes: ünïcödé and plain ASCII.\n".encode()
SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>\n'
HTML = b"<html><body><script>alert(1)</script><p>Hello</p></body></html>\n"

DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
PPTX_TYPE = "application/vnd.openxmlformats-officedocument.presentationml.presentation"


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


_CONTENT_TYPES = b'<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>'
DOCX = _zip({"[Content_Types].xml": _CONTENT_TYPES, "word/document.xml": b"<w:document/>"})
XLSX = _zip({"[Content_Types].xml": _CONTENT_TYPES, "xl/workbook.xml": b"<workbook/>"})
PPTX = _zip({"[Content_Types].xml": _CONTENT_TYPES, "ppt/presentation.xml": b"<p:presentation/>"})
PLAIN_ZIP = _zip({"notes.txt": b"hello", "more/data.csv": b"a,b\n1,2\n"})
DAMAGED_ZIP = b"PK\x03\x04" + b"\x14\x00" * 40
