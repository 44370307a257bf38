"""Fixtures for the running services: Postgres and Redis (real, local), the
fake LLM server (a real HTTP server on loopback), and a distributed
ChatForge stack (real worker and server processes)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings

from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.file_order import longest_files_first, recorded_durations
from tests.support.mcp_server import MCP_SERVER_HOST_PORT
from tests.support.site import API_KEY as WEATHER_API_KEY
from tests.support.site import LocalSite
from tests.support.stack import DistributedStack, distributed_stack
from tests.support.tools import EFFECTS_REDIS_URL


@pytest.fixture(scope="session")
def fake_llm() -> Iterator[FakeOpenAIServer]:
    server = FakeOpenAIServer()
    server.start()
    yield server
    server.stop()


QUEUES = ("llm", "tools", "tools_io", "default")


@pytest.fixture
def idle_broker() -> redis.Redis:
    """The pytest process's broker, where no worker listens: what the engine
    enqueues stays there to be counted. Only the queue lists are emptied
    (flushing would also drop Kombu's exchange bindings), and the sweeper's
    marker is set: this broker lost nothing, so a sweep sends only what is
    stalled (orchestration/queueing/broker_loss.py)."""
    from orchestration.queueing.broker_loss import MARKER_KEY

    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.delete(*QUEUES)
    client.set(MARKER_KEY, "tests")
    return client


def _test_database_url() -> str:
    db = settings.DATABASES["default"]
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


@pytest.fixture(scope="session")
def local_site() -> Iterator[LocalSite]:
    site = LocalSite().start()
    yield site
    site.stop()


@pytest.fixture(scope="session")
def stack(
    django_db_setup, django_db_blocker, fake_llm: FakeOpenAIServer, local_site: LocalSite
) -> Iterator[DistributedStack]:
    """Workers and web server against the test database, the test Redis and
    the fake LLM. Tests using it must commit their data
    (``django_db(transaction=True)``) so the other processes can see it."""
    with django_db_blocker.unblock():
        database_url = _test_database_url()
    with distributed_stack(
        database_url=database_url,
        redis_url=settings.REDIS_URL,
        extra_env={
            "OPENAI_BASE_URL": fake_llm.base_url,
            "OPENAI_API_KEY": "test-key",
            "CHATFORGE_DEMO_TOKEN_DELAY_S": "0",
            "CHATFORGE_TOOL_MODULES": "tests.support.tools",
            "CHATFORGE_TOOL_CATALOG_TTL_S": "0",
            "CHATFORGE_LLM_RETRY_INITIAL_S": "0.05",
            "CHATFORGE_TOOLS_ALLOWED_PRIVATE_HOSTS": f"{local_site.host_port},{MCP_SERVER_HOST_PORT}",
            "TOOL_WEATHER_API_KEY": WEATHER_API_KEY,
            "CHATFORGE_TEST_EFFECTS_REDIS_URL": EFFECTS_REDIS_URL,
        },
    ) as running:
        yield running


@pytest.fixture(autouse=True)
def _stack_quiet_before_the_flush(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that used the stack can end with a run still in its workers
    (a stream read only up to its headers, a run left to fail): the run is
    asked to stop and waited for here, before the database is flushed for
    the next test. A worker's transaction and the flush's ``TRUNCATE`` take
    the same tables' locks in different orders, and Postgres ended such a
    ``TRUNCATE`` as a deadlock, failing the next test with the last one's rows."""
    if "stack" not in request.fixturenames or request.node.get_closest_marker("django_db") is None:
        yield
        return
    request.getfixturevalue("_django_db_helper")  # set up first, so it flushes after this has waited
    yield
    _wait_for_runs_to_end(ask_to_stop_after_s=2.0, give_up_after_s=20.0)


def _wait_for_runs_to_end(*, ask_to_stop_after_s: float, give_up_after_s: float) -> None:
    from chatforge.conversations.models import Run

    started = time.monotonic()
    active = Run.objects.filter(status__in=[Run.Status.QUEUED, Run.Status.RUNNING])
    asked = False
    while active.exists():
        waited = time.monotonic() - started
        if waited > give_up_after_s:
            return  # the flush may still meet a live transaction: nothing more to do here
        if waited > ask_to_stop_after_s and not asked:
            active.update(cancel_requested=True)
            asked = True
        time.sleep(0.02)


@pytest.fixture
def make_user(django_user_model):
    """A user and a fresh API token for them: ``(user, token)``."""
    from chatforge.accounts.tokens import api_token_create

    counter = iter(range(1_000_000))

    def make(username: str | None = None):
        user = django_user_model.objects.create_user(username=username or f"user{next(counter)}", password="pw")
        return user, api_token_create(user=user, name="test").plaintext

    return make


@pytest.hookimpl(trylast=True)  # after pytest-django's own reordering within files
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Longest test files first, so the processes of ``make test`` end
    together (tests/support/file_order.py)."""
    items[:] = longest_files_first(items, recorded_durations())
