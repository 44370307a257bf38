"""The engine's side of ``tools.files``: a tool call's handle on the files
of its run's conversation, and the files a call returned.

``ConversationFiles`` is what ``ToolContext.files`` holds for a call of a
conversation's run. Every read is filtered by the conversation *and* its
owner, so no id reaches another conversation's or another user's file; a
file a tool saves goes through ``chatforge.files.services.file_create``,
like an upload (sniffed, size and quota checked, a document's text read by
the reading task), with ``source="tool"`` and the call's run and
``tool_call_id`` on its row.

Those two columns are how the engine learns which files a call returned
(``files_returned_by``), rather than from the handler's own memory: a
redelivery (a worker died after the handler saved) or a handler in another
thread still finds them, and saving again under the same name in the same
call gives back the first row instead of a second copy.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import BinaryIO, TypeVar

from django.db import connection
from django.db.models.functions import Length, Substr

from chatforge.conversations.models import Conversation, Run
from chatforge.db.connections import release_connections
from chatforge.errors import ChatForgeError
from chatforge.files.models import StoredFile
from chatforge.files.names import extension_of, safe_name
from chatforge.files.selectors import parse_file_id
from chatforge.files.services import file_create
from chatforge.files.sniffing import TEXT_TYPES_BY_EXTENSION
from chatforge.files.storage import file_storage
from chatforge.files.text import text_state
from tools.errors import ToolArgumentError, ToolError, TransientToolError
from tools.files import DEFAULT_PAGE_CHARS, FileInfo, FileNotInConversation, TextPage

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

_INFO_FIELDS = ("id", "name", "content_type", "kind", "size", "text_status", "text_error", "created_at")
# A text type's usual extension, to name a file a tool saved without one
# (the extension is what tells one text type from another, as for uploads).
_EXTENSION_FOR_TYPE = {content_type: ext for ext, content_type in reversed(TEXT_TYPES_BY_EXTENSION.items())}
_EXTENSION_FOR_TYPE.setdefault("text/plain", "txt")


def file_info(row: StoredFile) -> FileInfo:
    return FileInfo(id=str(row.id), name=row.name, content_type=row.content_type, kind=row.kind,
                    size=row.size, text_status=text_state(row).status)  # type: ignore[arg-type]


class ConversationFiles:
    """The files of one conversation, for one tool call (``tools.files.FileAccess``).

    Handlers run in a thread of their own (``tools.runner``), where Django
    opens a database connection of that thread's: each method called from a
    thread other than the one that made this object closes it again, or
    every call would leak one.
    """

    def __init__(self, *, user_id: int, conversation_id: str, run_id: str | None = None,
                 tool_call_id: str | None = None) -> None:
        self.user_id = user_id
        self.conversation_id = str(conversation_id)
        self.run_id = run_id
        self.tool_call_id = tool_call_id
        self._home = threading.get_ident()
        # Whether this delivery saved a file: the engine looks the call's
        # files up only then (or on a redelivery), keeping a call that
        # saved none at its statement budget.
        self.saved_any = False

    # --- FileAccess --------------------------------------------------------

    def list(self) -> list[FileInfo]:
        return self._db(lambda: [file_info(row) for row in self._files().only(*_INFO_FIELDS)])

    def info(self, file_id: str) -> FileInfo | None:
        return self._db(lambda: self._info(file_id))

    def read_text(self, file_id: str, *, offset: int = 0, limit: int = DEFAULT_PAGE_CHARS) -> TextPage:
        if offset < 0:
            raise ToolArgumentError(f"offset must be 0 or more, got {offset}")
        if limit < 1:
            raise ToolArgumentError(f"the page size must be at least 1 character, got {limit}")
        return self._db(lambda: self._page(file_id, offset, limit))

    def open_bytes(self, file_id: str) -> BinaryIO:
        row = self._db(lambda: self._row(file_id, "storage_name"))
        return file_storage().open(row.storage_name, "rb")

    def save(self, name: str, data: bytes | BinaryIO, *, content_type: str | None = None) -> FileInfo:
        if self.run_id is None or self.tool_call_id is None:
            raise ToolError("Only a tool call of a conversation's run can save files.")
        return self._db(lambda: self._save(_named(name, content_type), data))

    # --- the work ----------------------------------------------------------

    def _files(self):
        return StoredFile.objects.filter(conversation_id=self.conversation_id, user_id=self.user_id)

    def _info(self, file_id: str) -> FileInfo | None:
        key = parse_file_id(file_id)
        if key is None:
            return None
        row = self._files().filter(pk=key).only(*_INFO_FIELDS).first()
        return file_info(row) if row is not None else None

    def _row(self, file_id: str, *fields: str) -> StoredFile:
        key = parse_file_id(file_id)
        row = self._files().filter(pk=key).only(*_INFO_FIELDS, *fields).first() if key is not None else None
        if row is None:
            raise FileNotInConversation(file_id)
        return row

    def _page(self, file_id: str, offset: int, limit: int) -> TextPage:
        key = parse_file_id(file_id)
        # Only the page leaves the database, not a text of up to 2,000,000 characters.
        row = (self._files().filter(pk=key).defer("text")
               .annotate(page=Substr("text", offset + 1, limit), total=Length("text")).first()
               if key is not None else None)
        if row is None:
            raise FileNotInConversation(file_id)
        _check_readable(row)
        total: int = row.total or 0
        if offset > total:
            raise ToolArgumentError(
                f"offset {offset} is past the end of '{row.name}', which has {total} characters of text")
        page: str = row.page or ""
        end = offset + len(page)
        return TextPage(text=page, offset=offset, next_offset=end if end < total else None, total_chars=total,
                        truncated=row.text_truncated, name=row.name)

    def _save(self, name: str, data: bytes | BinaryIO) -> FileInfo:
        earlier = StoredFile.objects.filter(run_id=self.run_id, tool_call_id=self.tool_call_id,
                                            name=safe_name(name)).only(*_INFO_FIELDS).first()
        if earlier is not None:  # saved by an earlier attempt or delivery of this call
            self.saved_any = True
            return file_info(earlier)
        conversation = Conversation.objects.select_related("user").get(pk=self.conversation_id,
                                                                     user_id=self.user_id)
        run = Run.objects.only("id").get(pk=self.run_id)
        try:
            row = file_create(user=conversation.user, source=StoredFile.Source.TOOL, name=name, content=data,
                              conversation=conversation, run=run, tool_call_id=self.tool_call_id)
        except ChatForgeError as exc:
            # Too large, over the user's quota, a type not taken: final for this call.
            raise ToolError(f"The file '{safe_name(name)}' could not be saved: {exc.message}") from None
        self.saved_any = True
        return file_info(row)

    def _db(self, work: Callable[[], _T]) -> _T:
        try:
            return work()
        finally:
            if threading.get_ident() != self._home:
                if not connection.in_atomic_block:
                    connection.close()
            else:
                # The executor's check of file-id arguments, in the step's
                # thread: the connection goes back while the handler runs.
                release_connections()


def _check_readable(row: StoredFile) -> None:
    if row.kind == StoredFile.Kind.IMAGE:
        raise ToolArgumentError(f"'{row.name}' is an image ({row.content_type}): it has no text to read")
    state = text_state(row)  # a reading lost long ago is failed, not "still being read"
    if state.status == StoredFile.TextStatus.FAILED:
        reason = state.error or "it could not be read"
        raise ToolArgumentError(f"the text of '{row.name}' could not be read: {reason}")
    if state.status != StoredFile.TextStatus.READY:
        raise TransientToolError(
            f"the text of '{row.name}' is still being read; call read_file again shortly")


def _named(name: str, content_type: str | None) -> str:
    """``name``, given the extension of the text type ``content_type`` names
    when it has none (a tool's ``"report"`` with ``text/csv`` is ``report.csv``)."""
    if content_type is None or extension_of(safe_name(name)):
        return name
    extension = _EXTENSION_FOR_TYPE.get(content_type.split(";")[0].strip().lower())
    return f"{name}.{extension}" if extension else name


def files_returned_by(*, run_id: str, tool_call_id: str) -> list[FileInfo]:
    """The files a call saved (any delivery of it), oldest first."""
    rows = (StoredFile.objects.filter(run_id=run_id, tool_call_id=tool_call_id, source=StoredFile.Source.TOOL)
            .only(*_INFO_FIELDS).order_by("created_at", "id"))
    return [file_info(row) for row in rows]


def conversation_files_for(*, user_id: int | None, conversation_id: str | None, run_id: str | None = None,
                           tool_call_id: str | None = None) -> ConversationFiles | None:
    """The handle a call gets, or None when it belongs to no conversation."""
    if user_id is None or conversation_id is None:
        return None
    return ConversationFiles(user_id=user_id, conversation_id=conversation_id, run_id=run_id,
                             tool_call_id=tool_call_id)

