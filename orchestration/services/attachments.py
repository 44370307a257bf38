"""Files attached to a user's message: checked and linked when the message is
posted (docs/files.md, "Attaching files to a message").

The check runs inside ``run_start``'s transaction, once the model is known,
with the files' rows locked: two messages posted at once cannot both take
the same file, and a refusal rolls the message back with nothing kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser

from chatforge.conversations.models import Conversation, Message, Run
from chatforge.errors import FileUnreadable, ImagesNotSupported, InvalidRequest
from chatforge.files.message_parts import attached_file_ids
from chatforge.files.models import StoredFile
from chatforge.files.selectors import parse_file_id
from chatforge.files.text import text_state
from chatforge.llm.image_support import image_refusal

# The run option naming the files of the run's own message (so that its
# first turn knows, without a query, whether there are documents to wait for).
ATTACHMENTS_OPTION = "attachments"
# How often the first turn looks again at documents whose text is being read.
_POLL_S = 0.2


def check_attachment_count(file_ids: Sequence[str]) -> None:
    """Before anything is read: the number of files one message may carry."""
    limit = settings.CHATFORGE_MAX_FILES_PER_MESSAGE
    if len(file_ids) > limit:
        raise InvalidRequest(
            f"{len(file_ids)} files were attached; a message may carry at most {limit}.",
            details={"field": "attachments", "limit": limit},
        )


def attachments_checked(
    *,
    user: AbstractBaseUser,
    conversation: Conversation,
    file_ids: Sequence[str],
    model: str,
    replaced: Sequence[Any] = (),
) -> list[StoredFile]:
    """The files named by ``file_ids``, in that order, locked for this
    transaction; refused (400, nothing written) when one is not the user's,
    belongs to another conversation, is attached to another message (other
    than those ``replaced``: the messages an edit removes), could not be
    read, or is an image for a model that takes none."""
    # An id that is no UUID (a /v1 client's "file-…") names no file: missing, below.
    file_ids = list(dict.fromkeys(str(parse_file_id(i) or i) for i in file_ids))
    check_attachment_count(file_ids)
    if not file_ids:
        return []
    keys = [key for key in map(parse_file_id, file_ids) if key is not None]
    # Without their text (a document's can be megabytes): only its status is checked here.
    found = {str(f.pk): f for f in StoredFile.objects.select_for_update().filter(pk__in=keys, user=user)
             .defer("text")}
    missing = [i for i in file_ids if i not in found]
    if missing:
        raise InvalidRequest(
            f"No file with id {missing[0]}: it does not exist or is not yours. Upload it with POST /api/files/ "
            "and attach the id it gets.",
            details={"field": "attachments", "missing": missing},
        )
    files = [found[i] for i in file_ids]
    replaced_ids = {str(m) for m in replaced}
    for file in files:
        if file.conversation_id is not None and file.conversation_id != conversation.pk:
            raise InvalidRequest(
                f"The file '{file.name}' belongs to another conversation; upload it again to attach it here.",
                details={"field": "attachments", "file_id": str(file.pk)},
            )
        if file.message_id is not None and str(file.message_id) not in replaced_ids:
            raise InvalidRequest(
                f"The file '{file.name}' is already attached to an earlier message of this conversation; "
                "the model has it there.",
                details={"field": "attachments", "file_id": str(file.pk)},
            )
        state = text_state(file)  # a reading lost long ago counts as failed
        if state.status == StoredFile.TextStatus.FAILED:
            raise FileUnreadable(
                f"The file '{file.name}' could not be read: {state.error} Remove it from the message, "
                "or upload a readable copy.",
                details={"field": "attachments", "file_id": str(file.pk)},
            )
    if any(f.kind == StoredFile.Kind.IMAGE for f in files):
        refusal = image_refusal(model)
        if refusal:
            raise ImagesNotSupported(refusal, details={"field": "attachments", "model": model})
    return files


def attach(*, files: Sequence[StoredFile], message: Message) -> None:
    """Link the files to the (just written) message and its conversation."""
    if files:
        StoredFile.objects.filter(pk__in=[f.pk for f in files]).update(
            message_id=message.pk, conversation_id=message.conversation_id)


def attachments_of(messages: Sequence[Message]) -> dict[Any, list[StoredFile]]:
    """The files attached to each of these messages, by message id, in the
    order they were attached: one query, and none when no message names a file."""
    wanted = {m.pk: attached_file_ids(m.content_json) for m in messages}
    ids = [i for file_ids in wanted.values() for i in file_ids]
    if not ids:
        return {}
    found = {str(f.pk): f for f in StoredFile.objects.filter(pk__in=ids).defer("text")}
    # A file deleted since is left out (its message keeps its text).
    return {pk: [found[i] for i in file_ids if i in found] for pk, file_ids in wanted.items() if file_ids}


def wait_for_attachments(run: Run, *, should_stop: Callable[[], bool]) -> str | None:
    """Before a run's first model call: wait until every attached document's
    text has been read (the reading task runs on the tools worker; the page
    uploads a file when it is attached, so this is usually over before the
    message is sent). Returns why the run cannot go on (a document could not
    be read, or was not read within CHATFORGE_FILE_READ_WAIT_S), or None.
    Stops waiting, with None, once ``should_stop`` says the run was cancelled."""
    file_ids = run.options.get(ATTACHMENTS_OPTION) or []
    if not file_ids:
        return None
    deadline = time.monotonic() + settings.CHATFORGE_FILE_READ_WAIT_S
    while True:
        files = list(StoredFile.objects.filter(pk__in=file_ids).only("name", "text_status", "text_error",
                                                                      "created_at"))
        states = {f.pk: text_state(f) for f in files}
        failed = next((f for f in files if states[f.pk].status == StoredFile.TextStatus.FAILED), None)
        if failed is not None:
            return f"The file '{failed.name}' could not be read: {states[failed.pk].error}"
        pending = [f for f in files if states[f.pk].status == StoredFile.TextStatus.PENDING]
        if not pending:
            return None
        if time.monotonic() >= deadline:
            return (f"The file '{pending[0].name}' was still being read after "
                    f"{settings.CHATFORGE_FILE_READ_WAIT_S:g} s; send the message again in a moment.")
        if should_stop():
            return None
        time.sleep(_POLL_S)
