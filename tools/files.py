"""Files a tool reads and returns: the port the engine implements.

A tool never touches the database or the files storage itself. The engine
hands each call of a conversation's run a ``FileAccess`` (``ToolContext.files``)
that sees only that conversation's files, and saves the files a tool returns
as files of that conversation (``orchestration/services/tool_files.py``).
Keeping the port here, without Django, lets tools and their tests use it with
any implementation (docs/tools.md, "Files").

A tool names a file it takes as an argument with the JSON Schema
``{"type": "string", "format": "file-id"}`` (``FILE_ID``): before its handler
runs, every such argument must name a file of the run's conversation, or the
call goes back to the model as a mistake it can fix (``file_id_arguments``,
checked by the executor through ``tools.arguments.check_file_arguments``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, Literal, Protocol, TypedDict

from tools.errors import ToolArgumentError

FileKind = Literal["image", "document"]
TextStatus = Literal["none", "pending", "ready", "failed"]

# The schema format of an argument that names a conversation's file.
FILE_ID_FORMAT = "file-id"
FILE_ID: dict[str, Any] = {"type": "string", "format": FILE_ID_FORMAT}

# The most characters of a document's text one read returns unless asked
# for fewer: under the executor's default output limit (20,000), so a page
# reaches the model whole.
DEFAULT_PAGE_CHARS = 16_000


class ReturnedFile(TypedDict):
    """A file a call returned, as events and stored tool rounds carry it."""

    id: str
    name: str
    content_type: str
    kind: str
    size: int


@dataclass(frozen=True)
class FileInfo:
    """One file of the conversation, as a tool sees it."""

    id: str
    name: str
    content_type: str  # sniffed from the bytes, never from the name
    kind: FileKind
    size: int  # bytes
    # Whether a document's text can be read (``read_text``): "ready"; being
    # read: "pending"; unreadable: "failed"; an image: "none".
    text_status: TextStatus

    @property
    def text_readable(self) -> bool:
        return self.kind == "document" and self.text_status == "ready"

    def returned(self) -> ReturnedFile:
        return {"id": self.id, "name": self.name, "content_type": self.content_type, "kind": self.kind,
                "size": self.size}


@dataclass(frozen=True)
class TextPage:
    """A stretch of a document's text: ``text`` starts at character ``offset``;
    ``next_offset`` is where the next page starts, None at the end."""

    text: str
    offset: int
    next_offset: int | None
    total_chars: int
    # The document was longer than the text kept of it when it was read
    # (CHATFORGE_FILE_TEXT_MAX_CHARS): its end is missing.
    truncated: bool = False
    name: str = ""  # the file's name, for the reader's header


class FileAccess(Protocol):
    """The files of the conversation a call's run belongs to.

    Every method raises ``FileNotInConversation`` (a ``ToolArgumentError``)
    for an id that names no file of this conversation, whoever's it is: a
    tool can never reach another conversation's or another user's file.
    Methods may be called from the handler's own thread.
    """

    def list(self) -> list[FileInfo]:
        """The conversation's files, oldest first."""
        ...

    def info(self, file_id: str) -> FileInfo | None:
        """The file ``file_id`` of this conversation; None if there is none."""
        ...

    def read_text(self, file_id: str, *, offset: int = 0, limit: int = DEFAULT_PAGE_CHARS) -> TextPage:
        """Up to ``limit`` characters of a document's text from ``offset``.

        An image, or a document whose text could not be read, raises a
        ``ToolArgumentError`` saying so; a document still being read, a
        ``tools.errors.TransientToolError``."""
        ...

    def open_bytes(self, file_id: str) -> BinaryIO:
        """The file's bytes, to read (the caller closes it)."""
        ...

    def save(self, name: str, data: bytes | BinaryIO, *, content_type: str | None = None) -> FileInfo:
        """Save a file this call returns, as a file of the conversation.

        Its type is sniffed from the bytes (``content_type`` is a hint for
        text, e.g. ``text/csv``). Saving again under the same ``name`` in the
        same call (a retry, a redelivery) gives back the file saved first."""
        ...


class FileNotInConversation(ToolArgumentError):
    """An id that names no file of the run's conversation (the model's to fix)."""

    def __init__(self, file_id: object) -> None:
        super().__init__(no_such_file(file_id))


def no_such_file(file_id: object) -> str:
    shown = str(file_id)
    shown = shown if len(shown) <= 80 else shown[:80] + "…"
    return f"No file with id '{shown}' in this conversation; list_files shows the files there."


def no_file_access(tool_name: str) -> str:
    return (f"'{tool_name}' works on the files of a conversation, and this call belongs to none "
            "(it was not made in a conversation's run).")


def returned_files_line(files: Sequence[FileInfo | ReturnedFile]) -> str:
    """The line after a call's output that tells the model which files the
    call saved, with their ids (to mention them, or to read one)."""
    described = "; ".join(_described(f) for f in files)
    return f"\n[Files saved to the conversation by this call: {described}]"


def _described(file: FileInfo | ReturnedFile) -> str:
    info = file.returned() if isinstance(file, FileInfo) else file
    return f"\"{info['name']}\" (id {info['id']}, {info['content_type']}, {info['size']} bytes)"


def file_id_arguments(
    parameters: Mapping[str, Any], arguments: Mapping[str, Any]
) -> Iterator[tuple[str, Any]]:
    """``(json path, value)`` of every argument the schema says is a file id:
    top-level properties of format ``file-id``, and the items of top-level
    arrays whose ``items`` are. Values that are not strings are left to the
    schema's own validation."""
    properties = parameters.get("properties")
    if not isinstance(properties, Mapping):
        return
    for name, schema in properties.items():
        if name not in arguments or not isinstance(schema, Mapping):
            continue
        value = arguments[name]
        if _is_file_id(schema):
            if isinstance(value, str):
                yield f"$.{name}", value
        elif _is_file_id_array(schema) and isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, str):
                    yield f"$.{name}[{index}]", item


def declares_file_ids(parameters: Mapping[str, Any]) -> bool:
    """Whether any top-level argument (or array of them) is a file id."""
    properties = parameters.get("properties")
    if not isinstance(properties, Mapping):
        return False
    return any(isinstance(schema, Mapping) and (_is_file_id(schema) or _is_file_id_array(schema))
               for schema in properties.values())


def _is_file_id(schema: Mapping[str, Any]) -> bool:
    return schema.get("format") == FILE_ID_FORMAT


def _is_file_id_array(schema: Mapping[str, Any]) -> bool:
    items = schema.get("items")
    return isinstance(items, Mapping) and _is_file_id(items)
