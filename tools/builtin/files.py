"""``list_files`` and ``read_file``: the conversation's files, and a
document's text a page at a time.

A message's documents reach the model as text within a budget
(docs/files.md, "What the model gets"); where a document was cut, the note
the model reads names the ``read_file`` call that reads on. These tools see
only the files of the run's conversation, through ``ToolContext.files``.

Both run on the "io" pool: they wait on the database (and, for bytes, the
files storage) and compute nothing, so a thread serves them as well as a
prefork child and costs far less.
"""

from __future__ import annotations

from typing import Any

from tools.base import Tool, ToolContext, ToolPolicy
from tools.errors import ToolError
from tools.executor import output_limit
from tools.files import DEFAULT_PAGE_CHARS, FILE_ID, FileAccess, FileInfo, no_file_access

# Enough for any conversation a person keeps; the rest are counted.
MAX_LISTED_FILES = 200
# Room left in the output limit for read_file's header line (a long name and
# id included), so that a page is never cut by the limit's marker.
_HEADER_ROOM = 600

_TEXT_STATE = {
    "ready": "readable",
    "pending": "being read (try read_file again shortly)",
    "failed": "unreadable",
    "none": "no text (an image)",
}


def _files_of(context: ToolContext, tool_name: str) -> FileAccess:
    if context.files is None:
        raise ToolError(no_file_access(tool_name))
    return context.files


def _listed(info: FileInfo) -> dict[str, Any]:
    return {"id": info.id, "name": info.name, "type": info.content_type, "kind": info.kind, "size": info.size,
            "text": _TEXT_STATE.get(info.text_status, info.text_status)}


def list_files(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    files = _files_of(context, "list_files").list()
    shown = files[-MAX_LISTED_FILES:]  # the newest, when there are more
    answer: dict[str, Any] = {"count": len(files), "files": [_listed(info) for info in shown]}
    if len(files) > len(shown):
        answer["note"] = f"Only the newest {len(shown)} of {len(files)} files are listed."
    return answer


def read_file(arguments: dict[str, Any], context: ToolContext) -> str:
    """A header saying which characters these are and where the next page
    starts, then the text itself (as text: JSON would escape every line break)."""
    files = _files_of(context, "read_file")
    file_id: str = arguments["file_id"]
    offset: int = arguments.get("offset", 0)
    # A deployment may set a lower output limit than a page: the page shrinks
    # to fit, and the header says where the next one starts.
    limit = min(arguments.get("max_chars", DEFAULT_PAGE_CHARS), max(1, output_limit() - _HEADER_ROOM))
    page = files.read_text(file_id, offset=offset, limit=limit)
    name = page.name or file_id
    end = page.offset + len(page.text)
    if page.next_offset is not None:
        where = (f"the next page starts at offset {page.next_offset} "
                 f"(read_file with file_id=\"{file_id}\", offset={page.next_offset})")
    else:
        where = "this is the end of the text"
        if page.truncated:
            where += " as it was read; the document itself is longer and the rest was not kept"
    header = f"[{name}: characters {page.offset}-{end} of {page.total_chars}; {where}]"
    return f"{header}\n{page.text}"


_IO_READ = ToolPolicy(timeout_s=15.0, side_effects="read_only", pool="io")

LIST_FILES = Tool(
    name="list_files",
    description=(
        "List the files of this chat (uploads, and files a call made): id, name, type, size, and "
        "whether read_file can read its text."
    ),
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
    handler=list_files,
    policy=_IO_READ,
)

READ_FILE = Tool(
    name="read_file",
    description=(
        "Read a document of this chat as text (PDF, Word, spreadsheet, slides, HTML, CSV, code...), "
        "one page at a time: pass the offset the last page gave to read on."
    ),
    parameters={
        "type": "object",
        "properties": {
            "file_id": {**FILE_ID, "description": "The file's id, as list_files or the message gives it."},
            "offset": {"type": "integer", "minimum": 0, "default": 0,
                       "description": "The character to start at (0: the beginning)."},
            "max_chars": {"type": "integer", "minimum": 1, "maximum": DEFAULT_PAGE_CHARS,
                          "default": DEFAULT_PAGE_CHARS, "description": "The most characters to return."},
        },
        "required": ["file_id"],
        "additionalProperties": False,
    },
    handler=read_file,
    policy=_IO_READ,
)
