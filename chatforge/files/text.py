"""A document's text: read once, on a worker, after its row commits
(docs/files.md, "Reading documents").

``schedule_text_reading(file)`` marks a stored document ``pending`` and,
when the transaction commits, sends ``chatforge.read_file_text`` to the
``tools`` queue (the prefork tools worker, where a slow conversion holds a
process of its own, never a web request or an LLM worker's greenlets). The
task calls ``read_file_text(file_id)``, which reads the bytes from the
files storage, converts them (``chatforge/files/reading/``) and records
the text, or why it could not be read, with one conditional update: of two
deliveries of the same task, one writes.

A reading never leaves a file pending for good:

- the converters stop themselves after ``reading_budget_s()`` (a PDF,
  between pages), and an alarm at ``reading_time_limit_s()``, just under
  the tools worker's hard limit, interrupts one page or one office
  document that takes longer and records the file failed. The alarm is
  our own (SIGALRM in the prefork process's main thread) rather than
  Celery's soft time limit: that raises an ``Exception``, which
  markitdown's DOCX pre-processing catches and ignores, so the conversion
  ran on into the hard limit's kill;
- what nothing records (the hard limit's kill, a worker that died, a
  message lost with the broker) is covered by ``text_state``: a file
  pending for more than ``pending_stale_s()`` since its upload counts as
  failed for whoever reads it, and ``fail_stale_readings`` writes that down.
"""

from __future__ import annotations

import logging
import os
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chatforge.errors.outages import DependencyUnavailable

from .models import StoredFile
from .reading import DocumentText, ReadingLimits, UnreadableDocument, read_document
from .storage import file_storage

logger = logging.getLogger(__name__)

# The task, sent by name (this module is what the task calls: it does not import it).
READ_FILE_TEXT = "chatforge.read_file_text"
_COPY_CHUNK = 1024 * 1024
_ERROR_CHARS = StoredFile._meta.get_field("text_error").max_length


def hard_time_limit_s() -> int:
    """The task's hard time limit: the tools worker's (CHATFORGE_TOOL_HARD_TIME_LIMIT_S)."""
    return int(settings.CHATFORGE_TOOL_HARD_TIME_LIMIT_S)


def reading_time_limit_s() -> int:
    """When the alarm interrupts a conversion: ten seconds under the hard
    limit, time to record the failure."""
    return max(1, hard_time_limit_s() - 10)


def reading_budget_s() -> float:
    """The converters' own budget (checked between a PDF's pages): half the
    hard limit, 60 s by default, so a slow document ends with a message
    naming where it stopped rather than at the soft limit."""
    return hard_time_limit_s() / 2


def pending_stale_s() -> float:
    """How long after its upload a pending file counts as failed: long
    enough for the task to wait in a busy tools queue, start, use its whole
    hard limit and be retried after a database blip (10 minutes, or four
    hard limits if that is more)."""
    return float(max(600, 4 * hard_time_limit_s()))


class ReadingTimedOut(BaseException):
    """The alarm's interruption of a conversion. A BaseException, like
    KeyboardInterrupt, so that a converter's ``except Exception`` cannot
    swallow it."""


# After the first interruption the alarm fires again this often until the
# block ends: an interruption raised where Python swallows exceptions (a
# garbage-collector callback, a weakref callback, a __del__, all of which
# only print "Exception ignored in …") is raised again in the conversion.
REFIRE_S = 0.25


@contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """Raise ReadingTimedOut in this thread after ``seconds``, and again every
    REFIRE_S until the block ends. Only where signals reach the code and the
    timer is free: the main thread of a prefork tools worker's process.
    Elsewhere (the embedded worker's threads; a process whose timer is armed
    already, e.g. by pytest-timeout) nothing is set, and ``text_state``'s
    rule covers a reading that never ends.

    Seen in CI: the first interruption landed in the gc callback of
    ``chatforge.observability.gc_freeze``, was printed and dropped, and the
    conversion ran on until the hard time limit killed the process, leaving
    the file pending. Hence the re-firing.

    A converter that swallows even a BaseException (a bare ``except:``
    around its parsing) then returns what it had, often nothing: once the
    alarm has fired, the block raises ReadingTimedOut as it ends, whatever
    it returned, so a cut-short conversion is never recorded as the text."""
    if threading.current_thread() is not threading.main_thread() or signal.getitimer(signal.ITIMER_REAL)[0] > 0:
        yield
        return
    fired = threading.Event()
    armed = [True]  # cleared first thing on the way out: a late signal then does nothing

    def interrupt(signum: int, frame: object) -> None:
        if not armed[0]:
            return
        fired.set()
        raise ReadingTimedOut()

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds, REFIRE_S)
    try:
        yield
    finally:
        armed[0] = False  # no call before it: Python cannot run the handler between entering finally and here
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if fired.is_set():
        raise ReadingTimedOut()


@dataclass(frozen=True)
class TextState:
    """Where a file's text stands, for a reader: ``status`` is the row's,
    except that a reading pending past ``pending_stale_s()`` is ``failed``."""

    status: str
    error: str


def text_state(file: StoredFile, *, now: datetime | None = None) -> TextState:
    """The rule every reader of ``text_status`` should follow: ``pending``
    for longer than ``pending_stale_s()`` since the file was stored means
    the reading was lost (its worker killed at the hard time limit or
    gone, its message lost) and will not finish: the file is unreadable."""
    if file.text_status == StoredFile.TextStatus.PENDING and _is_stale(file.created_at, now=now):
        return TextState(status=StoredFile.TextStatus.FAILED, error=_stale_error())
    return TextState(status=file.text_status, error=file.text_error)


def schedule_text_reading(file: StoredFile) -> None:
    """Mark a stored document's text pending and have a tools worker read
    it once the surrounding transaction commits (at once outside one).
    Call it after the row is saved, in the transaction that saves it."""
    if file.kind != StoredFile.Kind.DOCUMENT:
        raise ValueError(f"only documents have text to read; {file.pk} is a {file.kind}")
    StoredFile.objects.filter(pk=file.pk).update(
        text_status=StoredFile.TextStatus.PENDING, text="", text_truncated=False, text_error="")
    file.text_status, file.text, file.text_truncated, file.text_error = StoredFile.TextStatus.PENDING, "", False, ""
    file_id = str(file.pk)
    transaction.on_commit(lambda: _send(file_id))


def _send(file_id: str) -> None:
    """Send the task (routed to the ``tools`` queue by CELERY_TASK_ROUTES).
    When the broker cannot be reached the file is failed at once, with a
    message that says to try again, rather than left pending for minutes."""
    try:
        current_app.send_task(READ_FILE_TEXT, args=[file_id])
    except Exception as exc:  # kombu OperationalError, redis errors: the broker is unreachable
        logger.warning("file %s: sending its reading failed (%s: %s)", file_id, type(exc).__name__, exc)
        _record_failure(file_id, "It could not be sent to be read (the task queue was unreachable): upload it "
                                 "again in a moment.")


def read_file_text(file_id: str) -> None:
    """Read a pending file's text and record it (or why it cannot be read).
    A file no longer pending (read by another delivery, or deleted) is left
    alone; a storage outage raises DependencyUnavailable, for the task to
    retry."""
    file = StoredFile.objects.filter(pk=file_id).first()
    if file is None or file.text_status != StoredFile.TextStatus.PENDING:
        return
    state = text_state(file)
    if state.status == StoredFile.TextStatus.FAILED:
        _record_failure(file_id, state.error)
        return
    started = time.monotonic()
    try:
        with _local_copy(file.storage_name) as path:
            with _alarm(reading_time_limit_s()):
                result = read_document(
                    path, file.content_type, max_chars=settings.CHATFORGE_FILE_TEXT_MAX_CHARS,
                    limits=ReadingLimits(time_budget_s=reading_budget_s()),
                )
    except UnreadableDocument as exc:
        _record_failure(file_id, exc.message)
        logger.info("file %s: unreadable after %.2f s: %s", file_id, time.monotonic() - started, exc.message)
    except ReadingTimedOut:
        _record_failure(file_id, f"Reading it took longer than {reading_time_limit_s()} s, the most a file may "
                                 "take: split it into smaller files, or upload the part you need.")
        logger.warning("file %s: reading stopped at its time limit (%s s)", file_id, reading_time_limit_s())
    except FileNotFoundError:
        _record_failure(file_id, "Its bytes are missing from the files storage: upload it again.")
        logger.warning("file %s: its bytes (%s) are missing from the files storage", file_id, file.storage_name)
    else:
        _record_text(file_id, result)
        logger.info("file %s: %s characters read%s in %.2f s", file_id, len(result.text),
                    " (truncated)" if result.truncated else "", time.monotonic() - started)


def fail_stale_readings(*, now: datetime | None = None) -> int:
    """Write ``text_state``'s rule down: every file pending past
    ``pending_stale_s()`` becomes failed. Returns how many did. For a
    periodic sweep; readers need not wait for it (``text_state``)."""
    cutoff = (now or timezone.now()) - timedelta(seconds=pending_stale_s())
    return StoredFile.objects.filter(text_status=StoredFile.TextStatus.PENDING, created_at__lt=cutoff).update(
        text_status=StoredFile.TextStatus.FAILED, text_error=_stale_error())


def _record_text(file_id: str, result: DocumentText) -> bool:
    return StoredFile.objects.filter(pk=file_id, text_status=StoredFile.TextStatus.PENDING).update(
        text=result.text, text_truncated=result.truncated, text_status=StoredFile.TextStatus.READY,
        text_error="") == 1


def _record_failure(file_id: str, message: str) -> bool:
    return StoredFile.objects.filter(pk=file_id, text_status=StoredFile.TextStatus.PENDING).update(
        text="", text_truncated=False, text_status=StoredFile.TextStatus.FAILED,
        text_error=_bounded_error(message)) == 1


def _bounded_error(message: str) -> str:
    return message if len(message) <= _ERROR_CHARS else message[:_ERROR_CHARS - 1] + "…"


def _is_stale(created_at: datetime, *, now: datetime | None) -> bool:
    return (now or timezone.now()) - created_at > timedelta(seconds=pending_stale_s())


def _stale_error() -> str:
    return (f"It was not read within {pending_stale_s() / 60:g} minutes of its upload (the reading was lost: "
            "it ran out of time, or its worker stopped): upload it again.")


@contextmanager
def _local_copy(storage_name: str) -> Iterator[str]:
    """A local path to the stored bytes: the file itself on a local files
    storage; a temporary copy, written a megabyte at a time, from a bucket
    (which has no paths, and whose objects the converters cannot seek in)."""
    storage = file_storage()
    try:
        path = storage.path(storage_name)
    except NotImplementedError:
        path = None
    if path is not None:
        if not os.path.exists(path):
            raise FileNotFoundError(path)
        yield path
        return
    with tempfile.NamedTemporaryFile(prefix="chatforge-read-") as copy:
        try:
            with storage.open(storage_name, "rb") as source:
                while chunk := source.read(_COPY_CHUNK):
                    copy.write(chunk)
        except FileNotFoundError:
            raise
        except Exception as exc:
            # A bucket answers a missing key with its own error: missing is
            # final; anything else (unreachable, credentials refused) is an
            # outage for the task to retry.
            if _missing(storage, storage_name):
                raise FileNotFoundError(storage_name) from exc
            raise DependencyUnavailable(f"the files storage could not be read: {type(exc).__name__}: {exc}") from exc
        copy.flush()
        yield copy.name


def _missing(storage, storage_name: str) -> bool:
    try:
        return not storage.exists(storage_name)
    except Exception:
        return False
