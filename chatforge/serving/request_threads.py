"""The threads a web process runs its sync requests on: a fixed set, taken
in arrival order.

Django runs each request's sync code in a thread-sensitive context of its
own (``asgiref.ThreadSensitiveContext``), which makes a new thread for every
request. When 500 runs are posted in the same second, that is 500 threads
sharing one interpreter lock: every request progresses a little at a time
and all of them are answered near the end, so the median POST waited
nearly as long as the last (docs/performance.md, "Bursts"). Here a request
to a sync view leases one of ``CHATFORGE_WEB_REQUEST_THREADS`` long-lived
single-thread executors for its whole life (every sync hop of one request
stays on one thread, as Django's database connections require) and
requests beyond that wait their turn in arrival order: the first posted is
answered first, and no thread is made or torn down per request.

Async views (the event streams, ``/v1`` streaming) keep a context of their
own: they hold a request open for as long as a run streams, and must not
hold a leased thread meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager


class RequestThreads:
    """``size`` single-thread executors, lent one per request."""

    def __init__(self, size: int) -> None:
        self._size = max(1, size)
        self._free: asyncio.Queue[ThreadPoolExecutor] | None = None

    @property
    def size(self) -> int:
        return self._size

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[ThreadPoolExecutor]:
        """An executor of its own for the duration of one request, waiting
        (first come, first served) while all are lent."""
        free = self._queue()
        executor = await free.get()
        try:
            yield executor
        finally:
            free.put_nowait(executor)

    def _queue(self) -> asyncio.Queue[ThreadPoolExecutor]:
        # Made in the server's event loop, on first use (asyncio.Queue binds
        # to the loop it first waits in).
        if self._free is None:
            self._free = asyncio.Queue()
            for index in range(self._size):
                executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"request-{index}")
                self._free.put_nowait(executor)
        return self._free
