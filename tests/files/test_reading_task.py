"""The reading service (chatforge/files/text.py): scheduling a document's
reading (the task on the tools queue, sent after commit), recording its
text or why it cannot be read once however often it is delivered, a
reading that was lost counting as failed, and bytes read from an S3
bucket (moto's server on loopback) through a temporary copy."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings

from chatforge.files.models import StoredFile
from chatforge.files.reading.formats import DOCX, PDF
from chatforge.files.storage import file_storage
from chatforge.files.text import (
    READ_FILE_TEXT,
    fail_stale_readings,
    pending_stale_s,
    read_file_text,
    schedule_text_reading,
    text_state,
)
from tests.engine.test_infrastructure_failures import broker_at
from tests.engine.test_redelivery import enqueued
from tests.files.test_reading import docx_bytes, pdf_bytes, text_pages
from tests.files.test_s3_storage import load_files_settings
from tests.support.files import image_file, stored_file
from tests.support.s3_server import S3Server, s3  # noqa: F401 - the session's S3 server fixture
from tests.support.stack import free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="reader", password="pw")


def pending(user, *, name: str, data: bytes, content_type: str) -> StoredFile:
    return stored_file(user, name=name, data=data, content_type=content_type, text_status="pending", text="")


def reloaded(file: StoredFile) -> StoredFile:
    return StoredFile.objects.get(pk=file.pk)


def test_a_pending_pdf_is_read_and_recorded(user):
    file = pending(user, name="report.pdf", data=pdf_bytes(["Revenue grew 12%.", "Costs held."]),
                   content_type=PDF)

    read_file_text(str(file.pk))

    file = reloaded(file)
    assert (file.text_status, file.text_error, file.text_truncated) == ("ready", "", False)
    assert file.text == "[page 1]\nRevenue grew 12%.\n\n[page 2]\nCosts held."


def test_a_word_document_is_read(user):
    file = pending(user, name="memo.docx", data=docx_bytes(["Meet at noon."]), content_type=DOCX)

    read_file_text(str(file.pk))

    assert reloaded(file).text.strip() == "Meet at noon."


def test_text_longer_than_the_setting_is_kept_up_to_it_and_marked_truncated(user, settings):
    settings.CHATFORGE_FILE_TEXT_MAX_CHARS = 1_000
    file = pending(user, name="long.pdf", data=pdf_bytes(text_pages(3)), content_type=PDF)

    read_file_text(str(file.pk))

    file = reloaded(file)
    assert file.text_status == "ready" and file.text_truncated is True and len(file.text) == 1_000


def test_an_unreadable_document_is_failed_with_the_reason(user):
    file = pending(user, name="locked.pdf", data=pdf_bytes(["x"], user_password="pw"), content_type=PDF)

    read_file_text(str(file.pk))

    file = reloaded(file)
    assert file.text_status == "failed" and file.text == ""
    assert file.text_error == "The PDF is encrypted (password-protected): remove the password and upload it again."


def test_a_second_delivery_changes_nothing(user):
    file = pending(user, name="notes.txt", data=b"First reading.", content_type="text/plain")
    read_file_text(str(file.pk))
    # What the first delivery wrote stands, even were the bytes to read differently now.
    with file_storage().open(file.storage_name, "wb") as handle:
        handle.write(b"Other bytes.")

    read_file_text(str(file.pk))

    assert reloaded(file).text == "First reading."


def test_a_file_whose_bytes_are_gone_is_failed_saying_so(user):
    file = pending(user, name="gone.txt", data=b"x", content_type="text/plain")
    file_storage().delete(file.storage_name)

    read_file_text(str(file.pk))

    assert reloaded(file).text_error == "Its bytes are missing from the files storage: upload it again."


def test_a_deleted_file_is_left_alone(user):
    file = pending(user, name="deleted.txt", data=b"x", content_type="text/plain")
    StoredFile.objects.filter(pk=file.pk).delete()

    read_file_text(str(file.pk))  # nothing to read, nothing raised

    assert not StoredFile.objects.filter(pk=file.pk).exists()


def test_a_reading_pending_past_the_bound_counts_as_failed_for_every_reader(user):
    file = pending(user, name="lost.pdf", data=pdf_bytes(["x"]), content_type=PDF)
    fresh = pending(user, name="fresh.pdf", data=pdf_bytes(["y"]), content_type=PDF)
    ready = stored_file(user, name="done.txt", data=b"done")
    long_ago = file.created_at - timedelta(seconds=pending_stale_s() + 1)
    StoredFile.objects.filter(pk__in=[file.pk, ready.pk]).update(created_at=long_ago)
    file, ready = reloaded(file), reloaded(ready)

    state = text_state(file)
    assert state.status == "failed"
    assert state.error.startswith("It was not read within 10 minutes of its upload (the reading was lost")
    assert text_state(fresh).status == "pending"
    assert text_state(ready).status == "ready"
    assert reloaded(file).text_status == "pending"  # text_state only reads

    assert fail_stale_readings() == 1
    assert (reloaded(file).text_status, reloaded(file).text_error) == ("failed", state.error)
    assert reloaded(fresh).text_status == "pending"


def test_a_late_delivery_of_a_lost_reading_records_the_failure_instead_of_reading(user):
    file = pending(user, name="late.txt", data=b"Readable, but too late.", content_type="text/plain")
    StoredFile.objects.filter(pk=file.pk).update(created_at=file.created_at - timedelta(hours=1))

    read_file_text(str(file.pk))

    file = reloaded(file)
    assert file.text_status == "failed" and file.text == ""
    assert file.text_error.startswith("It was not read within 10 minutes")


def test_scheduling_marks_the_file_pending_and_sends_the_task_to_the_tools_queue_on_commit(
        user, idle_broker, django_capture_on_commit_callbacks):
    file = stored_file(user, name="new.pdf", data=pdf_bytes(["x"]), content_type=PDF, text_status="ready",
                       text="old")

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        schedule_text_reading(file)
    assert (reloaded(file).text_status, reloaded(file).text) == ("pending", "")
    assert file.text_status == "pending"
    assert enqueued(idle_broker) == []  # nothing before the commit

    for callback in callbacks:
        callback()

    assert enqueued(idle_broker) == [(READ_FILE_TEXT, [str(file.pk)])]
    assert idle_broker.llen("tools") == 1


def test_images_have_no_text_to_schedule(user):
    with pytest.raises(ValueError, match="only documents have text to read"):
        schedule_text_reading(image_file(user))


def test_when_the_broker_is_unreachable_the_file_fails_at_once_saying_to_try_again(
        user, django_capture_on_commit_callbacks):
    file = stored_file(user, name="unsent.txt", data=b"x", text_status="pending", text="")

    with broker_at(f"redis://127.0.0.1:{free_port()}/0"), django_capture_on_commit_callbacks(execute=True):
        schedule_text_reading(file)

    file = reloaded(file)
    assert file.text_status == "failed"
    assert file.text_error == ("It could not be sent to be read (the task queue was unreachable): upload it again "
                               "in a moment.")


def test_a_document_in_an_s3_bucket_is_read_through_a_local_copy(user, s3: S3Server, monkeypatch):  # noqa: F811
    bucket = s3.create_bucket()
    files_settings = load_files_settings(monkeypatch, s3.storage_env(bucket))
    with override_settings(STORAGES=files_settings.STORAGES):
        storage = file_storage()
        with pytest.raises(NotImplementedError):
            storage.path("any")  # a bucket has no local paths
        file = pending(user, name="s3.pdf", data=pdf_bytes(["Stored in a bucket."]), content_type=PDF)
        missing = pending(user, name="s3-gone.txt", data=b"x", content_type="text/plain")
        storage.delete(missing.storage_name)

        read_file_text(str(file.pk))
        read_file_text(str(missing.pk))

    assert reloaded(file).text == "[page 1]\nStored in a bucket."
    assert reloaded(missing).text_error == "Its bytes are missing from the files storage: upload it again."
    assert sorted(s3.keys(bucket)) == [file.storage_name]
