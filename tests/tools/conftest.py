"""Fixtures for tools that talk HTTP: a scriptable server on loopback,
reachable through the address guard only while a test holds ``server``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.tools.net.local_server import LocalServer, allowed, running_server


@pytest.fixture(scope="module")
def local_server() -> Iterator[LocalServer]:
    with running_server() as started:
        yield started


@pytest.fixture
def server(local_server: LocalServer) -> Iterator[LocalServer]:
    """The module's server, allowed through the guard for this test only."""
    with allowed(local_server) as reachable:
        yield reachable
