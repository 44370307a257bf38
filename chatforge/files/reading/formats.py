"""The media types read, as the upload's sniffing names them."""

from __future__ import annotations

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
HTML = frozenset({"text/html", "application/xhtml+xml"})
# Read as text as they are, besides every text/* type but HTML (and any +json or +xml type).
TEXT_APPLICATION_TYPES = frozenset({
    "application/json", "application/ld+json", "application/x-ndjson", "application/xml",
    "application/yaml", "application/x-yaml", "application/toml", "application/javascript",
    "application/x-javascript", "application/typescript", "application/x-sh", "application/x-shellscript",
    "application/sql", "application/x-python", "application/x-httpd-php", "application/x-tex",
    "application/x-latex", "application/graphql",
})
# How a refusal names the file.
LABELS = {PDF: "PDF", DOCX: "Word document (DOCX)", XLSX: "spreadsheet (XLSX)", PPTX: "presentation (PPTX)"}


def is_text(media_type: str) -> bool:
    return ((media_type.startswith("text/") and media_type not in HTML) or media_type in TEXT_APPLICATION_TYPES
            or media_type.endswith(("+json", "+xml")))


def label(media_type: str) -> str:
    return LABELS.get(media_type) or ("HTML page" if media_type in HTML else "text file")
