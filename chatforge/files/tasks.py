"""The reading of a document's text, run by a tools worker
(``chatforge/files/text.py``; docs/files.md, "Reading documents").

Routed straight to the ``tools`` queue (chatforge/settings/queues.py): its
prefork processes enforce time limits (and run tasks in their main
thread, where the reading's alarm works), and a conversion that takes seconds
of CPU holds one of them, never a web request or the LLM worker's event
loop. Like the engine's tasks it takes an id and returns at once when the
work is no longer wanted (the file deleted, or already read by another
delivery). Database and storage outages are retried with backoff; the
file's own faults are recorded on the row, never retried.
"""

from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError

from chatforge.errors.outages import DependencyUnavailable

from .models import StoredFile
from .text import READ_FILE_TEXT, hard_time_limit_s, read_file_text


@shared_task(
    name=READ_FILE_TEXT,
    # No soft time limit: the reading's own alarm, under this one, stops a
    # conversion that runs long (chatforge/files/text.py says why).
    time_limit=hard_time_limit_s(),
    autoretry_for=(OperationalError, InterfaceError, DependencyUnavailable),
    retry_backoff=True,
    retry_backoff_max=30,
    retry_jitter=True,
    max_retries=5,
)
def read_file_text_task(file_id: str) -> None:
    if not StoredFile.objects.filter(pk=file_id, text_status=StoredFile.TextStatus.PENDING).exists():
        return
    read_file_text(file_id)
