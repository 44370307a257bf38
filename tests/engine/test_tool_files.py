"""The engine's file port (``orchestration/services/tool_files.py``) over
real rows and a real files storage (a directory of the test's own): what a
tool call of a conversation's run may see, read and save, and the
executor's check of file-id arguments against it."""

from __future__ import annotations

from datetime import timedelta

from typing import Any

import pytest
from django.utils import timezone

from chatforge.conversations.models import Conversation, Run
from chatforge.files.models import StoredFile
from chatforge.files.storage import file_storage
from orchestration.services.runs import RunOptions, run_start
from orchestration.services.tool_context import tool_context_for
from orchestration.services.tool_files import ConversationFiles
from tests.support.files import image_file, stored_file
from tools.base import Tool, ToolContext
from tools.errors import ToolArgumentError, ToolError, TransientToolError
from tools.executor import execute_tool
from tools.files import FILE_ID, FileNotInConversation
from tools.registry import ToolRegistry


@pytest.fixture(autouse=True)
def files_dir(settings, tmp_path):
    """The files storage in this test's own directory."""
    settings.CHATFORGE_FILES_DIR = str(tmp_path)
    settings.STORAGES = {**settings.STORAGES, "chatforge_files": {
        "BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path)}}}
    assert file_storage().location == str(tmp_path)
    return tmp_path


@pytest.fixture
def alice(make_user):
    return make_user("alice")[0]


@pytest.fixture
def bob(make_user):
    return make_user("bob")[0]


def _files(user, conversation, **call) -> ConversationFiles:
    return ConversationFiles(user_id=user.pk, conversation_id=str(conversation.pk), **call)


def _run(user, conversation, settings, fake_llm) -> Run:
    settings.OPENAI_BASE_URL = fake_llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    return run_start(user=user, conversation=conversation, content="make a report",
                     options=RunOptions(model="tool-files-port"))


@pytest.mark.django_db
def test_a_call_sees_only_the_files_of_its_conversation(alice, bob):
    here, elsewhere = Conversation.objects.create(user=alice), Conversation.objects.create(user=alice)
    notes = stored_file(alice, conversation=here)
    pixel = image_file(alice, conversation=here)
    other_conversations = stored_file(alice, conversation=elsewhere)
    unattached = stored_file(alice)
    bobs = stored_file(bob, conversation=Conversation.objects.create(user=bob))
    files = _files(alice, here)

    assert [(f.id, f.name, f.kind, f.text_status) for f in files.list()] == [
        (str(notes.pk), "notes.txt", "document", "ready"), (str(pixel.pk), "pixel.png", "image", "none")]
    assert files.info(str(pixel.pk)).content_type == "image/png"
    for outside in (other_conversations, unattached, bobs):
        assert files.info(str(outside.pk)) is None
        with pytest.raises(FileNotInConversation, match="list_files shows the files there"):
            files.open_bytes(str(outside.pk))
    assert files.info("not-a-uuid") is None
    # Bob's file in Bob's conversation is his, and a handle of Alice's on it sees nothing.
    assert _files(alice, bobs.conversation).list() == []


@pytest.mark.django_db
def test_a_documents_text_is_read_in_pages(alice):
    conversation = Conversation.objects.create(user=alice)
    text = "".join(f"line {n:03d}\n" for n in range(100))  # 900 characters
    doc = stored_file(alice, conversation=conversation, name="lines.txt", data=text.encode())
    files = _files(alice, conversation)

    first = files.read_text(str(doc.pk), limit=300)
    last = files.read_text(str(doc.pk), offset=first.next_offset + 300, limit=1000)

    assert (first.text, first.offset, first.next_offset, first.total_chars, first.name) == (
        text[:300], 0, 300, 900, "lines.txt")
    assert (last.text, last.offset, last.next_offset) == (text[600:], 600, None)
    assert files.read_text(str(doc.pk), offset=900).text == ""
    with pytest.raises(ToolArgumentError, match="past the end of 'lines.txt', which has 900 characters"):
        files.read_text(str(doc.pk), offset=901)


@pytest.mark.django_db
def test_text_that_cannot_be_read_says_why(alice):
    conversation = Conversation.objects.create(user=alice)
    pixel = image_file(alice, conversation=conversation)
    broken = stored_file(alice, conversation=conversation, name="locked.pdf", content_type="application/pdf",
                         text_status="failed", text_error="The PDF is encrypted (password-protected).")
    reading = stored_file(alice, conversation=conversation, name="big.pdf", text_status="pending")
    files = _files(alice, conversation)

    with pytest.raises(ToolArgumentError, match=r"'pixel.png' is an image \(image/png\): it has no text"):
        files.read_text(str(pixel.pk))
    with pytest.raises(ToolArgumentError, match="'locked.pdf' could not be read: The PDF is encrypted"):
        files.read_text(str(broken.pk))
    with pytest.raises(TransientToolError, match="'big.pdf' is still being read"):
        files.read_text(str(reading.pk))

    # A reading pending past its bound was lost: failed for the tool too (chatforge/files/text.py).
    StoredFile.objects.filter(pk=reading.pk).update(created_at=timezone.now() - timedelta(days=1))
    with pytest.raises(ToolArgumentError, match="the text of 'big.pdf' could not be read"):
        files.read_text(str(reading.pk))
    assert files.info(str(reading.pk)).text_status == "failed"


@pytest.mark.django_db
def test_open_bytes_reads_the_stored_bytes(alice):
    conversation = Conversation.objects.create(user=alice)
    pixel = image_file(alice, conversation=conversation)

    with _files(alice, conversation).open_bytes(str(pixel.pk)) as handle:
        assert handle.read() == pixel_bytes(pixel)


def pixel_bytes(row: StoredFile) -> bytes:
    with file_storage().open(row.storage_name, "rb") as handle:
        return handle.read()


@pytest.mark.django_db
def test_a_saved_file_is_a_conversation_file_of_the_call_and_saving_again_reuses_it(
        alice, settings, fake_llm, idle_broker):
    conversation = Conversation.objects.create(user=alice)
    run = _run(alice, conversation, settings, fake_llm)
    files = _files(alice, conversation, run_id=str(run.pk), tool_call_id="call_1")

    saved = files.save("report", b"city,people\nOslo,700000\n", content_type="text/csv")
    again = files.save("report", b"city,people\nOslo,700000\n", content_type="text/csv")

    assert files.saved_any
    assert saved == again
    assert (saved.name, saved.content_type, saved.kind, saved.size) == ("report.csv", "text/csv", "document", 24)
    row = StoredFile.objects.get()
    assert (row.source, row.run_id, row.tool_call_id, row.conversation_id, row.user_id, row.message_id) == (
        "tool", run.pk, "call_1", conversation.pk, alice.pk, None)
    assert row.text_status == "pending"  # the reading task reads it, as it does an upload
    assert pixel_bytes(row) == b"city,people\nOslo,700000\n"
    # Another call of the run saving the same name makes a file of its own.
    other = _files(alice, conversation, run_id=str(run.pk), tool_call_id="call_2").save("report.csv", b"a,b\n")
    assert other.id != saved.id and StoredFile.objects.count() == 2


@pytest.mark.django_db
def test_a_file_that_cannot_be_saved_is_a_final_tool_error(alice, settings, fake_llm, idle_broker):
    conversation = Conversation.objects.create(user=alice)
    run = _run(alice, conversation, settings, fake_llm)
    files = _files(alice, conversation, run_id=str(run.pk), tool_call_id="call_1")
    settings.CHATFORGE_USER_FILE_BYTES = 10

    with pytest.raises(ToolError, match="'blob.bin' could not be saved: This file's contents are binary data"):
        files.save("blob.bin", b"\x00\x01\x02\x03binary")
    with pytest.raises(ToolError, match="'big.txt' could not be saved: Storing this file .* would go past"):
        files.save("big.txt", b"more than ten bytes of text")
    with pytest.raises(ToolError, match="Only a tool call of a conversation's run can save files"):
        _files(alice, conversation).save("x.txt", b"x")
    assert not StoredFile.objects.exists()
    assert not files.saved_any


# --- the executor's check of file-id arguments, through the engine's context ---------


def _recording_tool() -> tuple[ToolRegistry, list[dict[str, Any]]]:
    calls: list[dict[str, Any]] = []

    def handler(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        calls.append(arguments)
        assert context.files is not None
        with context.files.open_bytes(arguments["file_id"]) as handle:
            return {"bytes": len(handle.read())}

    registry = ToolRegistry()
    registry.register(Tool(name="byte_count", description="Counts a file's bytes.",
                           parameters={"type": "object", "properties": {"file_id": FILE_ID},
                                       "required": ["file_id"]},
                           handler=handler))
    return registry, calls


@pytest.mark.django_db(transaction=True)  # the handler reads in a thread of its own
def test_a_file_id_argument_must_name_a_file_of_the_runs_conversation(alice, bob):
    here = Conversation.objects.create(user=alice)
    mine = image_file(alice, conversation=here)
    elsewhere = stored_file(alice, conversation=Conversation.objects.create(user=alice))
    bobs = stored_file(bob, conversation=Conversation.objects.create(user=bob))
    registry, calls = _recording_tool()
    context = tool_context_for(user_id=alice.pk, conversation_id=str(here.pk), run_id=None, tool_call_id=None)

    ok = execute_tool(registry, "byte_count", {"file_id": str(mine.pk)}, context=context)
    assert ok.success and ok.result == {"bytes": mine.size}
    assert len(calls) == 1

    for wrong in ("no-such-file", str(elsewhere.pk), str(bobs.pk)):
        refused = execute_tool(registry, "byte_count", {"file_id": wrong}, context=context)
        assert refused.status == "error" and refused.retryable_by_model, wrong
        assert f"$.file_id: No file with id '{wrong}' in this conversation; list_files shows the files there." \
            in refused.error
    assert len(calls) == 1  # never reached the handler


@pytest.mark.django_db
def test_a_tool_run_by_hand_has_no_files(alice):
    assert tool_context_for(user_id=alice.pk).files is None
