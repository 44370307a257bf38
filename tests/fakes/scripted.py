"""Scaffolding shared by the fake LLM servers (``tests.fakes.*_server``).

Each fake is a ``ScriptedServer`` subclass: real HTTP on 127.0.0.1, scripts
keyed by model name and indexed by *round*, thread-safe request recording,
``fail_times`` counters per (model, round) and a count of streams the client
abandoned. Routing, wire formats and the ``Reply`` knobs stay in each fake.
"""

from __future__ import annotations

import argparse
import copy
import logging
import sys
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Generic, TypeVar, cast

_GONE = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class ClientGone(Exception):
    """The client closed the connection while we were streaming."""


class ScriptedServer:
    """Lifecycle, scripts and request recording of a fake server.

    Subclasses set ``label`` (``"openai"``: thread and log names), ``logger``,
    ``handler`` (their request handler class) and ``round_of`` (the round of a
    request body); their ``Reply`` needs ``fail_status`` and ``fail_times``.
    """

    label: ClassVar[str]
    logger: ClassVar[logging.Logger]
    handler: ClassVar[type[BaseHTTPRequestHandler]]
    round_of: ClassVar[Callable[[dict[str, Any]], int]]

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, api_key: str | None = None) -> None:
        self._host = host
        self._port = port
        self.api_key = api_key
        self._lock = threading.Lock()
        self._scripts: dict[str, Any] = {}
        self._failures: dict[tuple[str, int], int] = {}
        self._requests: list[Any] = []
        self._headers: list[dict[str, str]] = []
        self._disconnects = 0
        self._connections = 0
        # reset() starts a new generation; a request records the generation it
        # began in (per handler thread), so a stream of an earlier test that is
        # abandoned after the reset is not counted against the next test.
        self._generation = 0
        self._request_generation = threading.local()
        self._httpd: ScriptedHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> Any:
        if self._httpd is not None:
            return self
        httpd = ScriptedHTTPServer((self._host, self._port), self)
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-{self.label}-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}"

    # -- scripting and inspection -----------------------------------------

    def add_script(self, model: str, script: Any) -> None:
        with self._lock:
            self._scripts[model] = script

    def reset(self) -> None:
        with self._lock:
            self._scripts.clear()
            self._failures.clear()
            self._requests.clear()
            self._headers.clear()
            self._disconnects = 0
            self._connections = 0
            self._generation += 1
            self._reset_more()

    def _reset_more(self) -> None:
        """Clear subclass state; called with the lock held."""

    @property
    def disconnects(self) -> int:
        """Streams the client abandoned before the end (cancellation)."""
        with self._lock:
            return self._disconnects

    @property
    def connections(self) -> int:
        """TCP connections accepted since the last reset (a client that keeps
        its connections alive opens one for many requests)."""
        with self._lock:
            return self._connections

    @property
    def models(self) -> list[str]:
        with self._lock:
            return sorted(self._scripts)

    def _recorded_copy(self) -> list[Any]:
        with self._lock:
            return copy.deepcopy(self._requests)

    def _headers_copy(self) -> list[dict[str, str]]:
        with self._lock:
            return copy.deepcopy(self._headers)

    # -- used by the handler ----------------------------------------------

    def _record(self, entry: Any, headers: dict[str, str] | None = None) -> None:
        with self._lock:
            self._request_generation.value = self._generation
            self._requests.append(copy.deepcopy(entry))
            if headers is not None:
                self._headers.append(headers)

    def _note_connection(self) -> None:
        with self._lock:
            self._connections += 1

    def _note_disconnect(self) -> None:
        with self._lock:
            if getattr(self._request_generation, "value", self._generation) == self._generation:
                self._disconnects += 1

    def _scripted_reply(self, model: str, body: dict[str, Any], exhausted: Callable[[int], Any]) -> Any:
        """The scripted reply for ``model``, ``exhausted(round)`` past the end
        of a list script, or ``None`` for an unknown model."""
        with self._lock:
            script = self._scripts.get(model)
        if script is None:
            return None
        if callable(script):
            return script(body)
        round_index = type(self).round_of(body)
        if round_index >= len(cast(Sequence[Any], script)):
            return exhausted(round_index)
        return script[round_index]

    def _fails_now(self, reply: Any, model: str, body: dict[str, Any]) -> bool:
        """Whether this request gets the reply's scripted failure (the first
        ``fail_times`` per model and round do)."""
        if reply.fail_status is None:
            return False
        key = (model, type(self).round_of(body))
        with self._lock:
            served = self._failures.get(key, 0)
            if served >= reply.fail_times:
                return False
            self._failures[key] = served + 1
            return True


class ScriptedHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], fake: ScriptedServer) -> None:
        super().__init__(address, fake.handler)
        self.fake = fake

    def process_request(self, request: Any, client_address: Any) -> None:
        self.fake._note_connection()
        super().process_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients drop idle keep-alive connections all the time; that is not
        worth a traceback on stderr. Anything else still gets one."""
        if isinstance(sys.exc_info()[1], _GONE):
            self.fake.logger.debug("fake %s: client %s went away", self.fake.label, client_address)
            return
        super().handle_error(request, client_address)


S = TypeVar("S", bound=ScriptedServer)


class ScriptedHandler(BaseHTTPRequestHandler, Generic[S]):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as real API servers set it (nginx, Go, uvicorn): with
    # Nagle's algorithm a stream's last small write (the end of the body)
    # waited for the client's delayed ACK, 40 ms on Linux.
    disable_nagle_algorithm = True

    @property
    def fake(self) -> S:
        assert isinstance(self.server, ScriptedHTTPServer)
        return cast(S, self.server.fake)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        self.fake.logger.debug(f"fake {self.fake.label}: " + format, *args)

    def _write_http_chunk(self, data: bytes, *, end_body: bool = False) -> None:
        """One HTTP/1.1 chunk, flushed; an empty ``data`` is the terminating chunk.

        ``end_body`` sends the terminating chunk in the same write, as a
        server does that ends the body with its last event: the client then
        has the end as soon as it has the event, however late this thread is
        scheduled again on a loaded machine. Connection reuse depends on
        that (chatforge/llm/providers/connection_reuse.py)."""
        chunk = b"%X\r\n%s\r\n" % (len(data), data)
        if end_body and data:
            chunk += b"0\r\n\r\n"
        try:
            self.wfile.write(chunk)
            self.wfile.flush()
        except _GONE as exc:
            raise ClientGone from exc


def run_standalone(
    server_class: type[ScriptedServer],
    *,
    label: str,
    port: int,
    default_model: str,
    script: Any,
    argv: Sequence[str] | None = None,
) -> None:
    """``python -m tests.fakes.<vendor>_server``: serve the demo script until Ctrl-C."""
    parser = argparse.ArgumentParser(description=f"Run the fake {label} server.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=port)
    parser.add_argument(
        "--model", action="append", help=f"model name to serve (repeatable); default {default_model}"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    server = server_class(host=args.host, port=args.port)
    for model in args.model or [default_model]:
        server.add_script(model, script)
    server.start()
    print(f"Fake {label} server at {server.base_url} serving {', '.join(server.models)}; Ctrl-C stops it.")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
