"""``file_create`` as the other callers use it: /v1's ``file`` parts pass
bytes, tools pass a stream (which may not seek) and a name of their own
making; the same checks apply, and nothing is stored on a refusal."""

from __future__ import annotations

import hashlib
import io

import pytest

from chatforge.conversations.models import Conversation
from chatforge.errors import FileTooLarge, InvalidRequest, NotFound, UnsupportedFileType
from chatforge.files.models import StoredFile
from chatforge.files.selectors import file_of, files_of
from chatforge.files.services import file_create
from chatforge.files.storage import file_storage

from . import samples
from .test_limits import stored_names

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("own_files_dir")]


class OneWayStream(io.RawIOBase):
    """A stream that only reads forward, as a pipe or an HTTP body does."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readinto(self, buffer) -> int:
        chunk = self._data.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


@pytest.fixture
def user(make_user):
    return make_user()[0]


def read_back(file: StoredFile) -> bytes:
    with file_storage().open(file.storage_name, "rb") as stored:
        return stored.read()


def test_bytes_a_seekable_stream_and_a_one_way_stream_are_stored_alike(user, idle_broker):
    for content in (samples.PDF, io.BytesIO(samples.PDF), io.BufferedReader(OneWayStream(samples.PDF))):
        file = file_create(user=user, source="tool", name="made.pdf", content=content, tool_call_id="call_1")
        assert (file.content_type, file.kind, file.size) == ("application/pdf", "document", len(samples.PDF))
        assert file.sha256 == hashlib.sha256(samples.PDF).hexdigest()
        assert file.source == "tool" and file.tool_call_id == "call_1"
        assert file.text_status == "pending"  # a document: its text is read by a task
        assert read_back(file) == samples.PDF


def test_a_tools_name_is_made_safe_too(user):
    file = file_create(user=user, source="tool", name="../../out\r\nX-Injected: 1\u202e.png", content=samples.PNG)
    assert file.name == "outX-Injected: 1.png"
    assert file.storage_name == f"u/{user.pk}/{file.pk}"


def test_a_one_way_stream_past_the_limit_is_refused_as_it_is_read(user, settings):
    settings.CHATFORGE_MAX_FILE_BYTES = 4096
    with pytest.raises(FileTooLarge) as refused:
        file_create(user=user, source="tool", name="big.txt",
                    content=io.BufferedReader(OneWayStream(b"t" * 10_000)))
    assert refused.value.details == {"limit_bytes": 4096}
    assert not StoredFile.objects.exists() and stored_names(user) == []


def test_refusals_store_nothing(user):
    with pytest.raises(InvalidRequest):
        file_create(user=user, source="upload", name="empty.txt", content=b"")
    with pytest.raises(UnsupportedFileType):
        file_create(user=user, source="upload", name="movie.mp4", content=samples.MP4)
    assert not StoredFile.objects.exists() and stored_names(user) == []


def test_a_conversation_of_another_user_is_refused(user, make_user):
    stranger = make_user()[0]
    theirs = Conversation.objects.create(user=stranger)
    with pytest.raises(NotFound):
        file_create(user=user, source="upload", name="a.png", content=samples.PNG, conversation=theirs)
    with pytest.raises(ValueError):
        file_create(user=user, source="elsewhere", name="a.png", content=samples.PNG)
    assert not StoredFile.objects.exists()


def test_the_selectors_see_only_the_users_own_files(user, make_user):
    stranger = make_user()[0]
    mine = file_create(user=user, source="upload", name="a.png", content=samples.PNG)
    theirs = file_create(user=stranger, source="upload", name="b.png", content=samples.PNG)
    assert list(files_of(user)) == [mine]
    assert file_of(user, mine.pk) == mine and file_of(user, str(mine.pk)) == mine
    assert file_of(user, theirs.pk) is None
    assert file_of(user, "not-a-uuid") is None and file_of(user, "a\x00b") is None and file_of(user, None) is None


def test_the_same_bytes_uploaded_again_take_the_text_already_read(make_user, idle_broker):
    user, _ = make_user()
    first = file_create(user=user, source="upload", name="a.txt", content=b"Read once, kept.")
    StoredFile.objects.filter(pk=first.pk).update(text_status="ready", text="Read once, kept.", text_truncated=True)

    again = file_create(user=user, source="upload", name="b.txt", content=b"Read once, kept.")
    other_user, _ = make_user()
    theirs = file_create(user=other_user, source="upload", name="a.txt", content=b"Read once, kept.")

    again.refresh_from_db()
    theirs.refresh_from_db()
    assert (again.text_status, again.text, again.text_truncated) == ("ready", "Read once, kept.", True)
    assert theirs.text_status == "pending"  # another user's file is never a source
