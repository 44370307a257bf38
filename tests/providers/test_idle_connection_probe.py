"""The HTTP pools' check of idle connections in a gevent worker
(chatforge/llm/providers/idle_connection_probe.py).

The check must answer as httpcore's own does (a kept connection the server
closed is not lent again; one still open is), only without gevent's hub.
Checked with gevent's monkey-patching in a process of its own, as the LLM
worker runs, over real HTTP on loopback, for both HTTP stacks the provider
SDKs use.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpcore2._backends.sync
import pytest

from chatforge.llm.providers import idle_connection_probe

ROOT = Path(__file__).resolve().parents[2]

GEVENT_CLIENT = """
from gevent import monkey
monkey.patch_all()

import json, sys, time
import httpcore._backends.sync, httpcore2._backends.sync, httpx, httpx2
from chatforge.llm.providers import idle_connection_probe

installed = idle_connection_probe.install()
url = sys.argv[1]
answers = {}
for name, module in (("httpx", httpx), ("httpx2", httpx2)):
    with module.Client(base_url=url) as client:
        statuses = [client.get(f"/{name}/keep").status_code, client.get(f"/{name}/keep").status_code,
                    client.get(f"/{name}/close").status_code]
        time.sleep(0.1)  # the server has closed that connection by now
        statuses.append(client.get(f"/{name}/keep").status_code)
    answers[name] = statuses
probes = {name: sys.modules[name].is_socket_readable.__qualname__
          for name in ("httpcore._backends.sync", "httpcore2._backends.sync")}
print(json.dumps({"installed": installed, "answers": answers, "probes": probes}))
"""


class KeepAliveServer:
    """HTTP/1.1 on loopback that keeps each connection, except after a
    request for a path ending in /close: it answers, then closes the
    connection without saying so (as a server timing out an idle one).
    Counts the connections per client (the first part of the path)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections: dict[str, int] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        counted = False
        with conn, conn.makefile("rb") as reader:
            while request_line := reader.readline():
                while reader.readline() not in (b"\r\n", b""):
                    pass  # headers: GET requests carry no body
                path = request_line.split()[1].decode()
                if not counted:
                    with self._lock:
                        client = path.split("/")[1]
                        self.connections[client] = self.connections.get(client, 0) + 1
                    counted = True
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                if path.endswith("/close"):
                    return

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def server() -> Iterator[KeepAliveServer]:
    running = KeepAliveServer()
    yield running
    running.close()


def test_under_gevent_the_pools_use_the_direct_probe_and_still_see_closed_connections(server):
    done = subprocess.run([sys.executable, "-c", GEVENT_CLIENT, server.url], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])

    assert report["installed"] == list(idle_connection_probe.SYNC_BACKENDS)
    assert set(report["probes"].values()) == {"readable_probe.<locals>.is_socket_readable"}
    # Every request answered; the kept connection reused while open, the
    # one the server closed not lent again: two connections per client.
    assert report["answers"] == {"httpx": [200] * 4, "httpx2": [200] * 4}
    assert server.connections == {"httpx": 2, "httpx2": 2}


def test_without_gevent_nothing_is_installed():
    before = httpcore2._backends.sync.is_socket_readable
    assert idle_connection_probe.install() == []
    assert httpcore2._backends.sync.is_socket_readable is before


def test_the_probe_answers_as_the_library_does():
    probe = idle_connection_probe.readable_probe(select.poll)
    ours, theirs = socket.socketpair()
    with ours, theirs:
        assert probe(ours) is False  # idle, open: may be lent
        theirs.sendall(b"x")
        assert probe(ours) is True
        ours.recv(1)
        theirs.close()
        assert probe(ours) is True  # the peer closed it: the next read is the end
    assert probe(ours) is True  # closed here: no descriptor
    assert probe(None) is True
