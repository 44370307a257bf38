"""The reading task on a real tools worker (the prefork worker of the
session's distributed stack, which shares the test's files directory):
documents scheduled in a committed transaction are read there, and
recorded ready or failed with the reason."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import transaction

from chatforge.files.models import StoredFile
from chatforge.files.reading.formats import DOCX, PDF
from chatforge.files.text import schedule_text_reading
from tests.engine.test_infrastructure_failures import broker_at
from tests.files.test_reading import docx_bytes, pdf_bytes
from tests.support.files import stored_file
from tests.support.stack import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_documents_are_read_by_the_tools_worker(stack, make_user):
    user, _ = make_user()
    documents = {
        "report.pdf": (pdf_bytes(["Water boils at 100 C.", "And freezes at 0 C."]), PDF),
        "memo.docx": (docx_bytes(["Meet at noon."], table=[["Day", "Room"], ["Monday", "4B"]]), DOCX),
        "locked.pdf": (pdf_bytes(["Secret"], user_password="pw"), PDF),
        "notes.md": ("# Notes\n\n- caf\u00e9 at 9\n".encode(), "text/markdown"),
    }
    files = {}
    # The test process's Celery app sends to the stack's broker (its own is one no worker reads).
    with broker_at(settings.REDIS_URL):
        with transaction.atomic():
            for name, (data, content_type) in documents.items():
                files[name] = stored_file(user, name=name, data=data, content_type=content_type,
                                          text_status="ready", text="")
                schedule_text_reading(files[name])
            assert StoredFile.objects.filter(text_status="pending").count() == 4

    def all_read() -> bool:
        return not StoredFile.objects.filter(pk__in=[f.pk for f in files.values()], text_status="pending").exists()

    wait_for(all_read, timeout=60, what="the documents' text", process=stack.process("tools"))

    read = {f.name: f for f in StoredFile.objects.filter(pk__in=[f.pk for f in files.values()])}
    assert (read["report.pdf"].text_status, read["report.pdf"].text) == (
        "ready", "[page 1]\nWater boils at 100 C.\n\n[page 2]\nAnd freezes at 0 C.")
    assert read["memo.docx"].text_status == "ready"
    assert "Meet at noon." in read["memo.docx"].text and "Monday" in read["memo.docx"].text
    assert read["notes.md"].text == "# Notes\n\n- caf\u00e9 at 9\n"
    assert (read["locked.pdf"].text_status, read["locked.pdf"].text_error) == (
        "failed", "The PDF is encrypted (password-protected): remove the password and upload it again.")
    # Each was read once, by the tools worker.
    log = stack.process("tools").log()
    received = [line for line in log.splitlines() if "Task chatforge.read_file_text[" in line and "received" in line]
    assert len(received) == 4, log[-3000:]
