"""Static files under ASGI.

WhiteNoise answers static requests with a file iterator, which Django's ASGI
handler can only read by warning and draining it in a worker thread. This
middleware, placed just outside WhiteNoise, hands Django an asynchronous
iterator instead, the way Django's own ``ASGIStaticFilesHandler`` does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from asgiref.sync import sync_to_async
from django.http import FileResponse, HttpRequest, HttpResponseBase


def _async_chunks(chunks) -> AsyncIterator[bytes]:
    async def read() -> AsyncIterator[bytes]:
        for part in await sync_to_async(list)(chunks):
            yield part

    return read()


class AsyncFileResponses:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if isinstance(response, FileResponse) and not response.is_async:
            response.streaming_content = _async_chunks(response.streaming_content)
        return response
