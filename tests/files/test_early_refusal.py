"""A body over its route's limit is refused by the real ASGI server before
it is read (chatforge/serving/request_size.py): by its Content-Length at
once, and, without one (chunked), as soon as the bytes received pass the
limit. Raw sockets, so that the client sends exactly what a test says and
sees what the server answers while it is still sending."""

from __future__ import annotations

import json
import socket
import threading
from urllib.parse import urlsplit

import httpx
import pytest

from tests.support.stack import embedded_server

from . import samples

MIB = 1024 * 1024
FILE_LIMIT = MIB  # the server's CHATFORGE_MAX_FILE_BYTES
TWO_GB = 2 * 1024 * MIB
# Only a guard against a hung server: no answer in this long fails the test.
SOCKET_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def server():
    with embedded_server(prefix="chatforge-early-413-", CHATFORGE_MAX_FILE_BYTES=str(FILE_LIMIT)) as running:
        yield running


def _connect(server) -> socket.socket:
    url = urlsplit(server.url)
    return socket.create_connection((url.hostname, url.port), timeout=SOCKET_TIMEOUT_S)


def _head(server, path: str, *framing: str, content_type: str = "multipart/form-data; boundary=b") -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", f"Authorization: Bearer {server.token}",
             f"Content-Type: {content_type}", *framing]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed before a response: {buffer!r}"
        buffer += chunk
    head, _, body = buffer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, value in
               (line.split(":", 1) for line in header_lines)}
    length = int(headers["content-length"])
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "the connection closed inside the response body"
        body += chunk
    return int(status_line.split(" ")[1]), headers, body[:length]


def test_a_declared_2_gb_upload_is_refused_before_its_body_is_read(server):
    with _connect(server) as sock:
        sock.sendall(_head(server, "/api/files/", f"Content-Length: {TWO_GB}") + b"--b\r\n" + b"x" * 1000)
        status, headers, body = _read_response(sock)
        # The server closes the connection: the rest of the body is never read.
        assert sock.recv(65536) == b""
    assert status == 413
    assert headers["content-type"] == "application/json" and headers["connection"] == "close"
    error = json.loads(body)["error"]
    assert error["code"] == "file_too_large"
    assert error["details"] == {"limit_bytes": FILE_LIMIT}


def test_an_expect_100_continue_client_is_refused_without_being_asked_for_the_body(server):
    with _connect(server) as sock:
        sock.sendall(_head(server, "/api/files/", f"Content-Length: {TWO_GB}", "Expect: 100-continue"))
        status, _, body = _read_response(sock)
    assert status == 413 and json.loads(body)["error"]["code"] == "file_too_large"


def _send_chunked_until_answered(server, path: str, **head) -> tuple[int, dict[str, str], bytes, int]:
    """Send a chunked body of up to 2 GB while reading the answer; stop as
    soon as it comes (or the server stops taking bytes). Returns the answer
    and how many body bytes were sent."""
    answered = threading.Event()
    answer: dict[str, tuple] = {}
    with _connect(server) as sock:
        sock.sendall(_head(server, path, "Transfer-Encoding: chunked", **head))

        def read() -> None:
            try:
                answer["response"] = _read_response(sock)
            finally:
                answered.set()

        reader = threading.Thread(target=read)
        reader.start()
        piece = b"x" * 65536
        frame = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        sent = 0
        try:
            while not answered.is_set() and sent < TWO_GB:
                sock.sendall(frame)
                sent += len(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server closed the connection after answering
        reader.join(SOCKET_TIMEOUT_S)
    assert "response" in answer, "no answer to the chunked body"
    return (*answer["response"], sent)


def test_a_chunked_upload_past_the_limit_is_refused_as_it_arrives(server):
    status, headers, body, sent = _send_chunked_until_answered(server, "/api/files/")
    assert status == 413 and headers["connection"] == "close"
    assert json.loads(body)["error"]["code"] == "file_too_large"
    # Refused well before the 2 GB were sent: the server stopped reading.
    assert sent < TWO_GB


def test_other_routes_keep_the_request_body_limit(server):
    with _connect(server) as sock:
        sock.sendall(_head(server, "/api/conversations/", f"Content-Length: {TWO_GB}",
                           content_type="application/json"))
        status, _, body = _read_response(sock)
    assert status == 413
    error = json.loads(body)["error"]
    assert error["code"] == "request_too_large" and error["details"] == {"limit_bytes": 2 * MIB}
    # /v1 answers in OpenAI's error shape.
    status, _, body, _ = _send_chunked_until_answered(server, "/v1/chat/completions",
                                                      content_type="application/json")
    assert status == 413
    assert json.loads(body)["error"]["code"] == "request_too_large"
    assert json.loads(body)["error"]["type"] == "invalid_request_error"


def test_uploads_within_the_limit_still_go_through(server):
    headers = {"Authorization": f"Bearer {server.token}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=SOCKET_TIMEOUT_S) as client:
        small = client.post("/api/files/", files={"file": ("pixel.png", samples.PNG, "image/png")})
        assert small.status_code == 201, small.text
        # Exactly at the limit: the envelope's margin lets it reach the view, which takes it.
        at_limit = client.post("/api/files/", files={"file": ("big.txt", b"a" * FILE_LIMIT, "text/plain")})
        assert at_limit.status_code == 201, at_limit.text
        # Over the limit by a byte, within the envelope's margin: the view's upload handler refuses it.
        over = client.post("/api/files/", files={"file": ("big.txt", b"a" * (FILE_LIMIT + 1), "text/plain")})
        assert over.status_code == 413 and over.json()["error"]["details"] == {"limit_bytes": FILE_LIMIT}
        downloaded = client.get(f"/api/files/{small.json()['id']}/content/")
        assert downloaded.status_code == 200 and downloaded.content == samples.PNG
        assert client.get("/healthz").status_code == 200
