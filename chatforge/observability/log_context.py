"""Who and what a log line is about: ``run_id``, ``conversation_id``,
``user_id``, ``tool_call_id``, ``request_id``, ``task_id``, bound for the
length of a request or a task (structlog's contextvars, which every log
record — ours, Django's, Celery's — picks up in the formatter), so one
``grep <run_id>`` finds a run's lines on the web process and every worker.

Context variables are per thread, per asyncio task and per gevent greenlet,
so concurrent requests and tasks never see each other's values; each
request and task starts clean.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from celery.signals import task_postrun, task_prerun
from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from structlog.contextvars import bind_contextvars, clear_contextvars

from chatforge.serving.hybrid_middleware import HybridMiddleware

REQUEST_ID_HEADER = "X-Request-ID"
# A client's own request id is kept when it is short and plain (it is logged).
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
# Our tasks' positional arguments, by task name.
_TASK_ARGS = {
    "chatforge.llm_turn": ("run_id", "iteration"),
    "chatforge.tool_call": ("run_id", "tool_call_id"),
    "chatforge.tool_call_io": ("run_id", "tool_call_id"),
    "chatforge.finalize_run": ("run_id",),
}


def bind_run(run: Any) -> None:
    """A step's run is known once it is claimed: its conversation and user."""
    bind_contextvars(run_id=str(run.id), conversation_id=str(run.conversation_id), user_id=run.user_id)


def bind_user(user_id: int | None) -> None:
    if user_id is not None:
        bind_contextvars(user_id=user_id)


@task_prerun.connect
def _bind_task(task_id: str | None = None, task: Any = None, args: tuple | None = None, **_: Any) -> None:
    clear_contextvars()
    name = getattr(task, "name", "")
    values = {key: value for key, value in zip(_TASK_ARGS.get(name, ()), args or (), strict=False)}
    values.pop("iteration", None)
    bind_contextvars(task_id=task_id, task=name, **values)


@task_postrun.connect
def _unbind_task(**_: Any) -> None:
    clear_contextvars()


def _signed_in_by_session(request: HttpRequest) -> bool:
    """Only a request with a session cookie can have a session user: the
    others (API tokens, bound by their authentication) cost no query here."""
    return settings.SESSION_COOKIE_NAME in request.COOKIES and hasattr(request, "auser")


class RequestContextMiddleware(HybridMiddleware):
    """Binds ``request_id`` (the client's X-Request-ID if it is plain, else a
    new one; echoed in the response) and the signed-in user for the request."""

    def __call__(self, request: HttpRequest):
        if self.is_async:
            return self.__acall__(request)
        request_id = self._bind(request)
        if _signed_in_by_session(request):
            bind_user(request.user.pk if request.user.is_authenticated else None)
        return self._finish(self.get_response(request), request_id)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        request_id = self._bind(request)
        if _signed_in_by_session(request):
            user = await request.auser()  # the session's user, read without blocking the event loop
            bind_user(user.pk if user.is_authenticated else None)
        return self._finish(await self.get_response(request), request_id)

    @staticmethod
    def _bind(request: HttpRequest) -> str:
        clear_contextvars()
        sent = request.headers.get(REQUEST_ID_HEADER, "")
        request_id = sent if _SANE_REQUEST_ID.fullmatch(sent) else uuid.uuid4().hex
        bind_contextvars(request_id=request_id)
        return request_id

    @staticmethod
    def _finish(response: HttpResponseBase, request_id: str) -> HttpResponseBase:
        response[REQUEST_ID_HEADER] = request_id
        return response
