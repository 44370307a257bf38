"""A scriptable HTTP server on 127.0.0.1 for the outbound-HTTP tool tests.

Each test says what a path answers (a list of ``Reply`` is served in order,
the last one repeating) and reads back the requests the server saw. It is
reachable only because the tests allow its ``host:port`` in
``tools.net.policy``; everything else on loopback stays refused.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tools.net import policy


@dataclass(frozen=True)
class Reply:
    """One scripted answer."""

    status: int = 200
    body: bytes | str = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # wait before answering (a slow endpoint)

    @classmethod
    def json(cls, value: object, status: int = 200, **headers: str) -> Reply:
        return cls(status, json.dumps(value), {"Content-Type": "application/json", **headers})

    @classmethod
    def html(cls, body: str, status: int = 200) -> Reply:
        return cls(status, body, {"Content-Type": "text/html; charset=utf-8"})

    @classmethod
    def redirect(cls, location: str, status: int = 302) -> Reply:
        return cls(status, b"", {"Location": location})


@dataclass(frozen=True)
class Seen:
    """One request as the server received it."""

    method: str
    path: str  # with the query string
    headers: dict[str, str]
    body: bytes


class LocalServer:
    """A ThreadingHTTPServer on an ephemeral loopback port, in a daemon thread."""

    def __init__(self) -> None:
        self.routes: dict[str, list[Reply]] = {}
        self.requests: list[Seen] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def host_port(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, path: str = "/") -> str:
        return f"http://{self.host_port}{path}"

    def route(self, path: str, *replies: Reply) -> None:
        with self._lock:
            self.routes[path] = list(replies)

    def reset(self) -> None:
        with self._lock:
            self.routes.clear()
            self.requests.clear()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next_reply(self, seen: Seen) -> Reply:
        with self._lock:
            self.requests.append(seen)
            replies = self.routes.get(seen.path.split("?", 1)[0])
            if not replies:
                return Reply(404, "no such route", {"Content-Type": "text/plain"})
            return replies.pop(0) if len(replies) > 1 else replies[0]

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                seen = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                reply = server._next_reply(seen)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                payload = reply.body.encode() if isinstance(reply.body, str) else reply.body
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout, size limit): expected in some tests

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

            def log_message(self, format: str, *args: object) -> None:
                pass  # keep test output clean

        return Handler


@contextmanager
def running_server() -> Iterator[LocalServer]:
    """A started server, stopped on exit (use it for a module-scoped fixture)."""
    server = LocalServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def allowed(server: LocalServer) -> Iterator[LocalServer]:
    """``server`` reachable through the guard, with no routes, until exit."""
    server.reset()
    policy.configure(allowed_private_hosts=[server.host_port])
    try:
        yield server
    finally:
        policy.configure(allowed_private_hosts=[])
        server.reset()
