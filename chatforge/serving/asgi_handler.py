"""Django's ASGI handler, with one thread hop per request to a sync view.

Under ASGI, Django runs its middleware chain in async mode, and every
``MiddlewareMixin`` middleware (sessions, CSRF, auth, messages, security,
CSP, …) hops to the request's thread and back for its ``process_request``
and again for its ``process_response``: about fifteen hops for one API
request, which cost more CPU than the request's own work (measured on
/healthz through uvicorn: 3.6–5.5 ms of server CPU per request with Django's
handler, 1.9–2.0 ms with this one; docs/performance.md).

Most of our views are sync (DRF, the admin, the pages), so this handler
builds the chain twice: a sync chain, entered with a single hop to the
request's thread, for sync views; and Django's own async chain for async
views (the streaming endpoints and /v1), which must not hold a thread while
they wait on a run. Which one a request takes is decided by its URL's view,
the same test Django applies to run a view (``iscoroutinefunction``). The
middleware are the same in both chains, so a request sees the same
behaviour either way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from asgiref.sync import ThreadSensitiveContext, iscoroutinefunction, sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.http import HttpRequest, HttpResponseBase
from django.urls import Resolver404, get_resolver, set_urlconf
from django.utils.log import log_response

from chatforge.serving.request_size import (
    BodyTooLarge,
    body_limit,
    capped,
    declared_length,
    request_path,
    send_too_large,
)
from chatforge.serving.request_threads import RequestThreads


class OneHopASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        super().__init__()  # Django's async chain
        self._threads = RequestThreads(settings.CHATFORGE_WEB_REQUEST_THREADS)
        # The sync chain lives on a handler of its own: the innermost step
        # of a chain reads its handler's view and exception middleware,
        # which each mode adapts differently.
        sync_handler = BaseHandler()
        sync_handler.load_middleware(is_async=False)
        self._sync_chain = sync_to_async(sync_handler._middleware_chain, thread_sensitive=True)

    async def __call__(self, scope, receive, send) -> None:
        """Django's own, except that a request to a sync view runs on one of
        the process's request threads (request_threads.py) rather than on a
        thread made for it, and a body over its limit is never read."""
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        # A body over the route's limit is refused before it is read (request_size.py).
        limit = body_limit(scope)
        if limit is not None:
            length = declared_length(scope)
            if length is not None and length > limit:
                await send_too_large(scope, send)
                return
            receive = capped(receive, limit)
        try:
            await self._handle(scope, receive, send)
        except BodyTooLarge:
            await send_too_large(scope, send)  # raised while Django read the body: nothing was sent yet

    async def _handle(self, scope, receive, send) -> None:
        if not self._serves_sync_view(scope):
            async with ThreadSensitiveContext():
                await self.handle(scope, receive, send)
            return
        async with self._threads.lease() as executor:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)

    @staticmethod
    def _serves_sync_view(scope) -> bool:
        try:
            view = get_resolver().resolve(request_path(scope)).func
        except Resolver404:
            return True  # answered in sync mode (404, the trailing-slash redirect)
        return not iscoroutinefunction(view)

    def _chain_for(self, request: HttpRequest) -> Callable[[HttpRequest], Awaitable[HttpResponseBase]]:
        try:
            view = get_resolver().resolve(request.path_info).func
        except Resolver404:
            return self._sync_chain  # the 404 (or the trailing-slash redirect) is answered in sync mode
        return self._middleware_chain if iscoroutinefunction(view) else self._sync_chain

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        """Django's own, with the chain this request's view needs."""
        set_urlconf(settings.ROOT_URLCONF)
        response = await self._chain_for(request)(request)
        response._resource_closers.append(request.close)
        if response.status_code >= 400:
            await sync_to_async(log_response, thread_sensitive=False)(
                "%s: %s", response.reason_phrase, request.path, response=response, request=request,
            )
        return response
