"""The reading task on a real tools worker (the prefork worker of the
session's distributed stack, which shares the test's files directory):
documents scheduled in a committed transaction are read there, and
recorded ready or failed with the reason; and on a tools worker of its
own whose hard time limit is 11 s, a DOCX that takes longer than the
reading's time limit (1 s) is interrupted inside markitdown (whose DOCX
pre-processing swallowed Celery's soft time limit) and recorded failed,
not read on into the hard limit's kill."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings
from django.db import transaction

from chatforge.files.models import StoredFile
from chatforge.files.reading.formats import DOCX, PDF
from chatforge.files.text import schedule_text_reading
from tests.engine.test_infrastructure_failures import broker_at
from tests.files.test_reading import docx_bytes, pdf_bytes
from tests.support.files import stored_file
from tests.support.private_services import private_redis
from tests.support.stack import TEST_SECRET_KEYS, base_env, start_worker, wait_for

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
    # The session's stack is shared: only this test's files count.
    ids = {str(f.pk) for f in files.values()}
    received = [line for line in log.splitlines() if "Task chatforge.read_file_text[" in line and "received" in line
                and any(i in line for i in ids)]
    assert len(received) == 4, log[-3000:]


def test_a_reading_past_its_time_limit_is_interrupted_and_recorded_failed(make_user, tmp_path: Path):
    # 16,000 paragraphs (1.6 MiB of XML, under the markup cap) take markitdown
    # 3-5 s on the reference machine: past a 1 s limit on any.
    user, _ = make_user()
    db = settings.DATABASES["default"]
    with private_redis() as broker:
        env = base_env(
            DATABASE_URL=f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
            REDIS_URL=broker.url(),
            DJANGO_SECRET_KEY="integration-tests-secret-key-0123456789-abcdefgh",
            CHATFORGE_SECRET_KEYS=TEST_SECRET_KEYS,
            CHATFORGE_FILES_DIR=os.environ["CHATFORGE_FILES_DIR"],
            CHATFORGE_TOOL_HARD_TIME_LIMIT_S="11",
        )
        worker = start_worker("tools-short-limit", queues="tools", pool="prefork", concurrency=1, env=env,
                              log_dir=tmp_path)
        try:
            data = docx_bytes([f"Paragraph {i} of a long and slow document to convert." for i in range(16_000)])
            with broker_at(broker.url()), transaction.atomic():
                file = stored_file(user, name="slow.docx", data=data, content_type=DOCX, text_status="ready",
                                   text="")
                schedule_text_reading(file)

            wait_for(lambda: StoredFile.objects.get(pk=file.pk).text_status != "pending", timeout=60,
                     what="the slow document's outcome", process=worker)
        finally:
            worker.stop()

    file = StoredFile.objects.get(pk=file.pk)
    assert (file.text_status, file.text_error) == (
        "failed", "Reading it took longer than 1 s, the most a file may take: split it into smaller files, or "
                  "upload the part you need.")
