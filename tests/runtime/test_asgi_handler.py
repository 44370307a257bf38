"""The ASGI handler runs a sync view's middleware in sync mode (one thread
hop for the whole request) and an async view's in Django's async chain (the
view runs on the event loop, holding no thread while it waits); sync
requests run on a fixed set of threads, lent in arrival order
(chatforge/serving/request_threads.py)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from asgiref.testing import ApplicationCommunicator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.test import override_settings
from django.urls import path
from django.utils.deprecation import MiddlewareMixin

from chatforge.serving.asgi_handler import OneHopASGIHandler

seen: list[tuple[str, object]] = []


class Recording(MiddlewareMixin):
    """Notes the mode its chain runs it in and the thread of each hook."""

    def process_request(self, request: HttpRequest) -> None:
        seen.append(("async_mode", self.async_mode))
        seen.append(("process_request", threading.get_ident()))

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        seen.append(("process_response", threading.get_ident()))
        return response


def sync_view(request: HttpRequest) -> HttpResponse:
    seen.append(("view", threading.get_ident()))
    return JsonResponse({"view": "sync"})


gate = threading.Event()
entered: list[str] = []


def held_view(request: HttpRequest) -> HttpResponse:
    """Notes that it started, then waits for the test to let it finish."""
    entered.append(request.GET["n"])
    seen.append(("view", threading.get_ident()))
    assert gate.wait(10)
    return JsonResponse({"n": request.GET["n"]})


async def async_view(request: HttpRequest) -> HttpResponse:
    seen.append(("view", threading.get_ident()))
    await asyncio.sleep(0)
    return JsonResponse({"view": "async"})


urlpatterns = [path("sync/", sync_view), path("async/", async_view), path("held/", held_view)]


async def get(handler: OneHopASGIHandler, url: str, query: bytes = b"") -> tuple[int, bytes]:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": url, "raw_path": url.encode(), "query_string": query, "root_path": "", "headers": [],
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000)}
    app = ApplicationCommunicator(handler, scope)
    await app.send_input({"type": "http.request", "body": b"", "more_body": False})
    start = await app.receive_output(5)
    body = await app.receive_output(5)
    await app.wait(5)
    return start["status"], body["body"]


@pytest.fixture
def handler():
    with override_settings(ROOT_URLCONF=__name__, MIDDLEWARE=[f"{__name__}.Recording"],
                           CHATFORGE_WEB_REQUEST_THREADS=2):
        seen.clear()
        entered.clear()
        gate.clear()
        yield OneHopASGIHandler()


def hooks() -> dict[str, object]:
    return dict(seen)


@pytest.mark.asyncio
async def test_a_sync_views_middleware_runs_in_sync_mode_in_the_views_thread(handler):
    assert await get(handler, "/sync/") == (200, b'{"view": "sync"}')
    ran = hooks()
    assert ran["async_mode"] is False
    assert ran["process_request"] == ran["view"] == ran["process_response"] != threading.get_ident()


@pytest.mark.asyncio
async def test_an_async_view_runs_on_the_event_loop_behind_the_async_chain(handler):
    assert await get(handler, "/async/") == (200, b'{"view": "async"}')
    ran = hooks()
    assert ran["async_mode"] is True
    assert ran["view"] == threading.get_ident()  # the loop's thread: no thread is held while it waits


@pytest.mark.asyncio
async def test_a_path_with_no_view_is_answered_through_the_sync_chain(handler):
    status, _ = await get(handler, "/nowhere/")
    assert status == 404
    assert hooks()["async_mode"] is False


async def held_requests(handler: OneHopASGIHandler, count: int, running: int) -> list[asyncio.Task]:
    """``count`` requests to the held view, made one after another; returns
    once ``running`` of them are inside it."""
    requests = []
    for n in range(count):
        requests.append(asyncio.create_task(get(handler, "/held/", f"n={n}".encode())))
        await asyncio.sleep(0)  # each request reaches the handler before the next is made
    deadline = asyncio.get_running_loop().time() + 10
    while len(entered) < running and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
    return requests


@pytest.mark.asyncio
async def test_sync_requests_share_a_fixed_set_of_threads(handler):
    """Two threads (the fixture's setting): of five requests held in their
    views, the first two run and three wait for a thread; every request ran
    on one of the same two threads, none on the event loop's."""
    requests = await held_requests(handler, 5, running=2)
    # The first two, in either order (they run at once on the two threads);
    # the others wait for a thread, not for the interpreter.
    assert sorted(entered) == ["0", "1"]
    gate.set()
    results = await asyncio.gather(*requests)
    assert [body for _, body in results] == [b'{"n": "%d"}' % n for n in range(5)]
    assert sorted(entered) == ["0", "1", "2", "3", "4"]
    threads = {ident for name, ident in seen if name == "view"}
    assert len(threads) == 2 and threading.get_ident() not in threads


@pytest.mark.asyncio
async def test_requests_waiting_for_a_thread_get_it_in_arrival_order():
    """One thread: what waits is served first come, first served."""
    with override_settings(ROOT_URLCONF=__name__, MIDDLEWARE=[], CHATFORGE_WEB_REQUEST_THREADS=1):
        entered.clear()
        gate.clear()
        requests = await held_requests(OneHopASGIHandler(), 5, running=1)
        assert entered == ["0"]
        gate.set()
        await asyncio.gather(*requests)
    assert entered == ["0", "1", "2", "3", "4"]


@pytest.mark.asyncio
async def test_an_async_view_holds_no_request_thread(handler):
    """Both threads held by sync requests: an async view is still answered."""
    held = [asyncio.create_task(get(handler, "/held/", f"n={n}".encode())) for n in range(2)]
    deadline = asyncio.get_running_loop().time() + 10
    while len(entered) < 2 and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
    assert await get(handler, "/async/") == (200, b'{"view": "async"}')
    gate.set()
    await asyncio.gather(*held)
