"""Running one handler call under a deadline, whatever kind of handler it is.

The executor may be called from a Celery worker, a plain thread or a thread
that already runs an event loop, and handlers may be sync or async. Running
every call in its own daemon thread gives one mechanism that works in all of
these: the caller waits on the thread for at most the timeout.

Limits:

* A timed-out *sync* handler cannot be killed: Python has no safe way to stop a
  thread. Its thread keeps running, detached, until the handler returns; its
  result is discarded. The hard ``time_limit`` of the Celery tools queue is the
  backstop that eventually recycles a worker stuck this way.
* A timed-out *async* handler is cancelled at its next ``await`` (it runs under
  ``asyncio.timeout`` in its own event loop), so it stops cleanly unless it
  blocks the loop with synchronous work.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from tools.base import Handler, ToolContext


@dataclass(frozen=True)
class Completed:
    """The handler returned ``value``."""

    value: Any


@dataclass(frozen=True)
class Raised:
    """The handler raised ``error``."""

    error: BaseException


@dataclass(frozen=True)
class TimedOut:
    """The handler did not finish before the deadline."""


Outcome = Completed | Raised | TimedOut


def run_with_timeout(
    handler: Handler,
    arguments: dict[str, Any],
    context: ToolContext,
    *,
    timeout_s: float,
    thread_name: str = "tool-handler",
) -> Outcome:
    """Call ``handler(arguments, context)`` in a daemon thread and wait at most ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    outcomes: list[Outcome] = []

    def target() -> None:
        outcomes.append(_call(handler, arguments, context, deadline))

    # Copy the caller's context variables so handlers see the same logging or
    # request context as code running in the caller's thread.
    thread = threading.Thread(
        target=contextvars.copy_context().run, args=(target,), name=thread_name, daemon=True
    )
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive() or not outcomes:
        return TimedOut()
    return outcomes[0]


def _call(handler: Handler, arguments: dict[str, Any], context: ToolContext, deadline: float) -> Outcome:
    """Run the handler to completion in the current (worker) thread and record how it ended.

    Catches ``BaseException`` because nothing outside this thread could see an
    exception escaping it; the executor decides what each one means.
    """
    try:
        value = handler(arguments, context)
        if inspect.isawaitable(value):
            return asyncio.run(_await_before(value, deadline))
        return Completed(value)
    except BaseException as exc:  # noqa: BLE001 - reported to the waiting caller
        return Raised(exc)


async def _await_before(awaitable: Awaitable[Any], deadline: float) -> Outcome:
    """Await ``awaitable``, cancelling it at ``deadline``.

    ``asyncio.timeout`` rather than ``asyncio.wait_for`` because its
    ``expired()`` tells our deadline apart from a ``TimeoutError`` the handler
    raised itself (say, from an HTTP client), which is an ordinary failure.
    """
    remaining = max(deadline - time.monotonic(), 0.0)
    try:
        async with asyncio.timeout(remaining) as scope:
            return Completed(await awaitable)
    except TimeoutError as exc:
        if scope.expired():
            return TimedOut()
        return Raised(exc)
