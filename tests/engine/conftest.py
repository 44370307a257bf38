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


@pytest.fixture
def in_process_engine(settings, fake_llm, idle_broker, tmp_path):
    """Steps run in the test's process, as the tasks would run them: the fake
    model, the event log in memory, files in a directory of the test's own."""
    settings.OPENAI_BASE_URL = fake_llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.CHATFORGE_EVENT_LOG = "memory"
    settings.STORAGES = {**settings.STORAGES, "chatforge_files": {
        "BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path)}}}
    reset_event_log()
    yield
    reset_event_log()
