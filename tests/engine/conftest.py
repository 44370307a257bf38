"""Fixtures shared by the engine's tests."""

from __future__ import annotations

import pytest

from orchestration.event_log import get_event_log, reset_event_log


@pytest.fixture(params=["redis", "memory"])
def either_event_log(request, settings):
    """The process's event log, once on Redis and once in memory.

    Through pytest-django's ``settings`` (not a nested override_settings):
    both restore on teardown, and interleaved they left the last test's
    backend set for every test after it."""
    settings.CHATFORGE_EVENT_LOG = request.param
    reset_event_log()
    yield get_event_log()
    reset_event_log()
