"""A base for middleware that runs in Django's sync and async stacks alike
(no sync/async adapter, which would cost a thread hop per request under
ASGI): it is marked a coroutine function when the next handler is one."""

from __future__ import annotations

from collections.abc import Callable

from asgiref.sync import iscoroutinefunction, markcoroutinefunction


class HybridMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)
