"""Storing and deleting files: one path for every file that arrives, an
upload (``POST /api/files/``), a ``/v1`` ``file`` content part, or a file a
tool returned (docs/files.md).

``file_create`` never holds a file in memory: it reads the bytes in chunks
(counting, hashing, checking they are text), tells the type from them
(``sniffing.py``), and streams them to the files storage under a key of our
own (``u/<user id>/<file id>``, never the client's name). Uploads arrive in
a temporary file already (``chatforge/api/file_views.py``); bytes given as
``bytes`` are small by construction (a request body within
CHATFORGE_MAX_REQUEST_BYTES); a stream that cannot seek is spooled to a
temporary file first, since sniffing a ZIP reads its end.

The bytes are stored before the row, so that the user's quota lock
(``limits.lock_user_files``) is held only for the check and the insert,
not for a 64 MiB write to a bucket. When the row cannot be made (the quota
filled meanwhile, a database error), the bytes are deleted again. Deleting
a row, alone or by a cascade from its conversation or user, deletes its
bytes once the deletion commits (``signals.py``).
"""

from __future__ import annotations

import codecs
import hashlib
import logging
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any, BinaryIO

from django.contrib.auth.models import AbstractBaseUser
from django.core.files.base import ContentFile, File
from django.db import transaction

from chatforge.conversations.models import Conversation, Run
from chatforge.errors import NotFound

from .limits import check_file_size, check_quota, lock_user_files, max_file_bytes, too_large
from .models import StoredFile
from .names import safe_name
from .sniffing import HEAD_BYTES, sniff
from .storage import file_storage
from .text import schedule_text_reading

logger = logging.getLogger(__name__)

CHUNK_BYTES = 1024 * 1024
# A stream that cannot seek is copied to a temporary file that stays in
# memory up to this size.
_SPOOL_MEMORY_BYTES = 1024 * 1024


@dataclass(frozen=True)
class _Scan:
    size: int
    sha256: str
    head: bytes
    utf8_text: bool  # every byte decoded as UTF-8, and none was NUL


def storage_name_for(*, user: AbstractBaseUser, file_id: uuid.UUID) -> str:
    return f"u/{user.pk}/{file_id}"


def _text_from_twin(file: StoredFile) -> bool:
    """Give ``file`` the text already read from the same bytes among its
    owner's files, if any: a document is read once however often it is
    uploaded (a /v1 client sends a conversation's files again with every
    request). A failed reading is not copied: it may have been a passing
    fault, so the new file is read afresh. Returns whether text was copied."""
    twin = (StoredFile.objects.filter(user_id=file.user_id, sha256=file.sha256, kind=file.kind,
                                      text_status=StoredFile.TextStatus.READY)
            .exclude(pk=file.pk).values("text", "text_truncated").first())
    if twin is None:
        return False
    StoredFile.objects.filter(pk=file.pk).update(text=twin["text"], text_truncated=twin["text_truncated"],
                                                 text_status=StoredFile.TextStatus.READY)
    file.text, file.text_truncated, file.text_status = twin["text"], twin["text_truncated"], StoredFile.TextStatus.READY
    return True


def file_create(
    *,
    user: AbstractBaseUser,
    source: str,
    name: str,
    content: File | BinaryIO | IO[bytes] | bytes,
    conversation: Conversation | None = None,
    run: Run | None = None,
    tool_call_id: str = "",
) -> StoredFile:
    """Store a file of ``user``'s and return its row.

    ``name`` is what the client (or tool) called it: made safe, it is only
    ever shown. Raises InvalidRequest (empty), FileTooLarge (over
    CHATFORGE_MAX_FILE_BYTES), UnsupportedFileType (the bytes are no type
    taken) or FileQuotaExceeded (the user's stored bytes would pass their
    quota); nothing is stored then. A document's text is read afterwards,
    by a task sent when the row commits (``text.schedule_text_reading``),
    unless the owner has the same bytes read already (``_text_from_twin``)."""
    if source not in StoredFile.Source.values:
        raise ValueError(f"source must be one of {StoredFile.Source.values}, not {source!r}")
    if conversation is not None and conversation.user_id != user.pk:
        # Callers check ownership first; a slip must not file it under someone else's conversation.
        raise NotFound("Not found: the conversation does not exist or you do not have access to it.")
    display_name = safe_name(name)
    file_id = uuid.uuid4()
    with _seekable(content) as stream:
        scan = _scan(stream)
        check_file_size(scan.size)
        sniffed = sniff(head=scan.head, stream=stream, utf8_text=scan.utf8_text, name=display_name)
        check_quota(user=user, adding=scan.size)  # early, before any byte is written; again below, locked
        stream.seek(0)
        stored_as = file_storage().save(storage_name_for(user=user, file_id=file_id), stream)
    try:
        with transaction.atomic():
            lock_user_files(user)
            check_quota(user=user, adding=scan.size)
            file = StoredFile.objects.create(
                id=file_id, user=user, conversation=conversation, run=run, tool_call_id=tool_call_id,
                source=source, name=display_name, content_type=sniffed.content_type, kind=sniffed.kind,
                size=scan.size, sha256=scan.sha256, storage_name=stored_as,
            )
            if file.kind == StoredFile.Kind.DOCUMENT and not _text_from_twin(file):
                schedule_text_reading(file)
    except BaseException:
        delete_bytes(stored_as)
        raise
    logger.info("file %s stored: %s, %s bytes, %s (source %s)", file.pk, file.content_type, file.size,
                file.kind, source)
    return file


def file_delete(*, file: StoredFile) -> None:
    """Delete a file: its row now, its bytes when the deletion commits."""
    file.delete()


def delete_bytes(storage_name: str) -> None:
    """Delete a file's bytes from the storage. A failure is logged, never
    raised: the row is gone already, and bytes nobody can reach are only
    space."""
    try:
        file_storage().delete(storage_name)
    except Exception:
        logger.exception("deleting the bytes of %s from the files storage failed", storage_name)


@contextmanager
def _seekable(content: Any) -> Iterator[File]:
    """The content as a Django ``File`` over a seekable stream (the caller's
    own stream is left open: it owns it)."""
    if isinstance(content, (bytes, bytearray, memoryview)):
        yield ContentFile(bytes(content))
        return
    stream = content.file if isinstance(content, File) else content
    if _can_seek(stream):
        yield content if isinstance(content, File) else File(stream)
        return
    limit = max_file_bytes()
    with tempfile.SpooledTemporaryFile(max_size=_SPOOL_MEMORY_BYTES) as spool:
        copied = 0
        while chunk := content.read(CHUNK_BYTES):
            copied += len(chunk)
            if copied > limit:
                raise too_large(limit=limit)
            spool.write(chunk)
        spool.seek(0)
        yield File(spool)


def _can_seek(stream: Any) -> bool:
    try:
        return bool(stream.seekable())
    except (AttributeError, ValueError, OSError):
        return False


def _scan(stream: File) -> _Scan:
    """One pass over the bytes, a chunk at a time: size (stopping as soon as
    it is past the limit), SHA-256, the first bytes, and whether it is text."""
    limit = max_file_bytes()
    digest = hashlib.sha256()
    decoder: codecs.IncrementalDecoder | None = codecs.getincrementaldecoder("utf-8")()
    head = b""
    size = 0
    stream.seek(0)
    while chunk := stream.read(CHUNK_BYTES):
        size += len(chunk)
        if size > limit:
            raise too_large(limit=limit)
        digest.update(chunk)
        if len(head) < HEAD_BYTES:
            head += chunk[: HEAD_BYTES - len(head)]
        if decoder is not None:
            try:
                if b"\x00" in chunk:
                    raise UnicodeDecodeError("utf-8", chunk, 0, 1, "NUL")
                decoder.decode(chunk)
            except UnicodeDecodeError:
                decoder = None
    if decoder is not None:
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            decoder = None
    stream.seek(0)
    return _Scan(size=size, sha256=digest.hexdigest(), head=head, utf8_text=decoder is not None)
