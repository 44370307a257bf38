"""A small website on loopback for tools to call in tests: an HTML page and
a JSON API that insists on an API key header."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

API_KEY = "test-weather-key"
PAGE = """<!doctype html><html><head><title>ChatForge test page</title>
<script>var secret = "not for the model";</script><style>p {color: red}</style></head>
<body><nav>Home | About</nav><h1>Opening hours</h1><p>The museum opens at 9:30 on Sundays.</p></body></html>"""


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        url = urlparse(self.path)
        if url.path == "/page.html":
            self._send(200, "text/html; charset=utf-8", PAGE.encode())
        elif url.path == "/api/weather":
            if self.headers.get("X-Api-Key") != API_KEY:
                self._send(401, "application/json", b'{"error": "missing or wrong API key"}')
                return
            city = parse_qs(url.query).get("q", ["?"])[0]
            body = {"data": [{"city": city, "temp_c": 21, "sky": "clear"}]}
            self._send(200, "application/json", json.dumps(body).encode())
        else:
            self._send(404, "text/plain", b"not found")

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # quiet
        pass


class LocalSite:
    def __init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.host_port = f"127.0.0.1:{self.port}"

    def start(self) -> LocalSite:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
