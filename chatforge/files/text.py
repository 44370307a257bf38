"""Reading a document's text: scheduled when its row is made, done by the
task ``chatforge.read_file_text`` on the tools queue (docs/files.md,
"Reading documents")."""

from __future__ import annotations

from celery import current_app
from django.db import transaction

from .models import StoredFile

READ_FILE_TEXT = "chatforge.read_file_text"


def schedule_text_reading(file: StoredFile) -> None:
    """Mark the document pending and send the task that reads it once the
    row commits (a worker never looks for a row it cannot see yet). Sent by
    name through the anonymous exchange to the tools queue, as the engine's
    own routes are (chatforge/settings/queues.py)."""
    StoredFile.objects.filter(pk=file.pk).update(text_status=StoredFile.TextStatus.PENDING)
    file.text_status = StoredFile.TextStatus.PENDING
    file_id = str(file.pk)
    transaction.on_commit(lambda: current_app.send_task(
        READ_FILE_TEXT, args=[file_id], queue="tools", exchange="", routing_key="tools", declare=()))
