"""Web servers whose logs the tests read: one writing JSON lines with debug
off (production), one writing text with debug on (as ``make run``), both
real ``manage.py serve`` processes on the test database."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings

from tests.support.stack import TEST_SECRET_KEYS, Process, base_env, free_port, start_server, wait_for

FORMATS = ("json", "text")


@dataclass
class LoggingServer:
    format: str
    http_url: str
    ws_url: str
    process: Process

    def log(self) -> str:
        return self.process.log()

    def mark(self) -> int:
        """Where the log ends now: what a request logs comes after it."""
        return len(self.log())

    def lines_until(self, start: int, needle: str, timeout: float = 30.0) -> list[str]:
        """The log's lines from ``start`` up to the first one holding
        ``needle`` (waited for: uvicorn writes its access line after the
        response has gone out)."""
        found: list[str] = []

        def arrived() -> bool:
            lines = self.log()[start:].splitlines()
            for index, line in enumerate(lines):
                if needle in line:
                    found[:] = lines[: index + 1]
                    return True
            return False

        wait_for(arrived, timeout=timeout, what=f"{needle!r} in the {self.format} server's log",
                 process=self.process)
        return found


@pytest.fixture(scope="session")
def logging_servers(django_db_setup, django_db_blocker) -> Iterator[dict[str, LoggingServer]]:
    db = settings.DATABASES["default"]
    with django_db_blocker.unblock():
        database_url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    servers: dict[str, LoggingServer] = {}
    try:
        for log_format in FORMATS:
            env = base_env(
                DATABASE_URL=database_url, REDIS_URL=settings.REDIS_URL,
                # The tests' key: a session signed in by the tests is valid there.
                DJANGO_SECRET_KEY=settings.SECRET_KEY,
                CHATFORGE_SECRET_KEYS=TEST_SECRET_KEYS, CHATFORGE_LOG_LEVEL="INFO",
                CHATFORGE_LOG_FORMAT=log_format, DJANGO_DEBUG="true" if log_format == "text" else "false",
                # A second message within the minute is a 429.
                CHATFORGE_MESSAGE_RATE="1/min",
            )
            port = free_port()
            log_dir = Path(tempfile.mkdtemp(prefix=f"chatforge-logs-{log_format}-"))
            process = start_server(port=port, env=env, log_dir=log_dir, name=f"server-{log_format}")
            servers[log_format] = LoggingServer(log_format, f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}",
                                                process)
        yield servers
    finally:
        for server in servers.values():
            server.process.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{time.monotonic_ns()}"
