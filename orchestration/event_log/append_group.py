"""Appends from a process's concurrent callers, sent to Redis together.

The LLM worker streams hundreds of model turns at once on gevent, each
appending a ``content.delta`` every few tens of ms. Sent one by one, an
append cost about 400 µs of the worker's CPU (a socket send, a poll and a
receive each; docs/performance.md), and at 300 streaming turns that was
more than a core. Sent together, about 80–100 µs.

This is group commit: a caller that finds nobody sending becomes the
*leader*: it takes every append queued so far (its own among them), sends
them as one pipeline and hands each caller its reply. Callers that arrive
meanwhile queue and wait; when the leader is done it wakes the first of
them as the next leader, so no caller sends for others for longer than one
round trip. Alone, a caller sends at once: the same one round trip as
before. Works the same for threads and (monkey-patched) greenlets.

A caller gets back the raw replies of its own appends (values, or the
exception one of them raised) and finishes them itself, in its own thread:
what an append needs beyond the pipeline (loading the script after a Redis
restart, asking Postgres whether a missing log may start afresh) stays the
caller's.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any


class _Slot:
    __slots__ = ("done", "error", "items", "lead", "replies")

    def __init__(self, items: Sequence[Any]) -> None:
        self.items = items
        self.done: threading.Event | None = None  # made for callers that wait (a leader never does)
        self.lead = False  # woken to send the next batch, not with replies
        self.replies: list[Any] = []
        self.error: BaseException | None = None


class AppendGroup:
    """Sends the items of concurrent ``submit`` calls in one batch.

    ``send`` takes the items of every caller in the batch, in order, and
    returns one reply per item (or raises: every caller in the batch gets
    the exception). If the leader is interrupted while sending (a time
    limit, a kill: not an ``Exception``), the interruption is its own; the
    other callers get ``interrupted`` (their appends may or may not have
    landed, as with a connection lost mid-command)."""

    def __init__(self, send: Callable[[list[Any]], list[Any]], *, interrupted: type[Exception]) -> None:
        self._send = send
        self._interrupted = interrupted
        self._reset()
        # A forked child (a prefork worker) starts with an empty group: a
        # batch its parent had out at the fork is not the child's to wait for.
        reset = weakref.WeakMethod(self._reset)
        os.register_at_fork(after_in_child=lambda: (method := reset()) is not None and method())

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[_Slot] = []
        self._leading = False

    def submit(self, items: Sequence[Any]) -> list[Any]:
        """The replies to ``items``, sent together with whatever other
        callers submitted meanwhile."""
        slot = _Slot(items)
        with self._lock:
            self._queue.append(slot)
            lead = not self._leading
            self._leading = True
            if not lead:
                slot.done = threading.Event()
        if not lead:
            self._wait(slot)
            if not slot.lead:
                return self._outcome(slot)
        self._lead(slot)
        return self._outcome(slot)

    def _wait(self, slot: _Slot) -> None:
        assert slot.done is not None
        try:
            slot.done.wait()
        except BaseException:
            # Interrupted (a time limit, a kill): never leave the group
            # without a leader, nor an unsent append of ours in the queue.
            with self._lock:
                if slot in self._queue:
                    self._queue.remove(slot)
                    if slot.lead:
                        self._pass_lead_locked()
            raise

    def _lead(self, slot: _Slot) -> None:
        with self._lock:
            batch, self._queue = self._queue, []
        error: BaseException | None = None
        replies: list[Any] = []
        try:
            replies = self._send([item for queued in batch for item in queued.items])
        except BaseException as exc:
            error = exc
        start = 0
        for queued in batch:
            if error is None:
                queued.replies = replies[start : start + len(queued.items)]
                start += len(queued.items)
            elif queued is not slot and not isinstance(error, Exception):
                queued.error = self._interrupted(f"sending the batch was interrupted ({type(error).__name__})")
            else:
                queued.error = error
            if queued is not slot and queued.done is not None:
                queued.done.set()
        with self._lock:
            self._pass_lead_locked()

    def _pass_lead_locked(self) -> None:
        if self._queue:
            nxt = self._queue[0]
            nxt.lead = True
            if nxt.done is not None:
                nxt.done.set()
        else:
            self._leading = False

    @staticmethod
    def _outcome(slot: _Slot) -> list[Any]:
        if slot.error is not None:
            raise slot.error
        return slot.replies
