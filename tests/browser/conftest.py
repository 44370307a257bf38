"""Browser tests: Playwright driving Debian's Chromium (never a downloaded
browser) against the distributed stack (real workers, uvicorn, Postgres,
Redis, the fake LLM server).

``make test`` installs Chromium with apt when it is missing; these tests do
not skip without it, they fail saying how to install it.

Set ``CHATFORGE_SCREENSHOTS_DIR`` to keep the screenshots the tests take at
the moments the docs show (``make screenshots`` writes them to
``docs/screenshots/``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.db import connections
from playwright.sync_api import Browser, Page, expect, sync_playwright

from chatforge.llm.models import LanguageModel, Provider
from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.stack import DistributedStack

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
PASSWORD = "browser-test-pw"
# How long an ``expect`` waits for the page to get there (Playwright's
# default is 5 s). A wait, not a speed requirement: on 2 busy cores a page
# can take longer than 5 s to draw an answer that is on its way.
expect.set_options(timeout=20_000)


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> Iterator[Browser]:
    """One Chromium per test. Playwright's sync API keeps an asyncio loop
    running in this thread, which makes Django refuse ORM calls from the
    test ("async context"); the refusal is lifted only while a browser test
    runs, where nothing else shares the thread."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's Chromium (apt-get install chromium); "
                    "`make test` does it when run as root or with CI=true.")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield instance
        instance.close()
        # ORM calls made while Playwright's loop ran used connections of
        # their own; close them, or the test database cannot be dropped.
        connections.close_all()


PHONE = {"width": 390, "height": 844}


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    yield from _checked_page(browser, viewport={"width": 1280, "height": 860})


@pytest.fixture
def phone_page(browser: Browser) -> Iterator[Page]:
    """A page the size of a phone, in the dark theme, checked like ``page``."""
    yield from _checked_page(browser, viewport=PHONE, color_scheme="dark")


def _checked_page(browser: Browser, **context_options) -> Iterator[Page]:
    context = browser.new_context(**context_options)
    context.set_default_timeout(30_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # Chromium reports each thing the Content-Security-Policy blocked as a
    # console error ("Refused to … because it violates …"): every browser
    # test also checks that our pages need nothing the policy forbids.
    violations: list[str] = []
    page.on("console", lambda message: violations.append(message.text)
            if message.type == "error" and "Content Security Policy" in message.text else None)
    yield page
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"
    assert not violations, f"Content-Security-Policy violations: {violations}"


@pytest.fixture
def browser_user(django_user_model):
    """A user who can log in with ``PASSWORD``; ``staff=True`` for the admin."""

    def make(username: str, *, staff: bool = False):
        return django_user_model.objects.create_user(
            username=username, password=PASSWORD, is_staff=staff, is_superuser=staff)

    return make


@pytest.fixture
def log_in(stack: DistributedStack) -> Callable[[Page, str], None]:
    def log_in(page: Page, username: str) -> None:
        page.goto(f"{stack.http_url}/")
        page.fill("#id_username", username)
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_selector("#message-input")

    return log_in


@pytest.fixture
def fake_model(fake_llm: FakeOpenAIServer) -> Callable[..., str]:
    """A model row served by the fake LLM with ``script``, so it is in the
    pages' model pickers. Returns its name."""

    def make(name: str, script) -> str:
        provider, _ = Provider.objects.get_or_create(
            name="fake-openai", defaults={"kind": "openai", "base_url": fake_llm.base_url})
        LanguageModel.objects.create(name=name, provider=provider)
        fake_llm.add_script(name, script)
        return name

    return make


@pytest.fixture
def screenshot() -> Callable[[Page, str], None]:
    """Keeps a screenshot when CHATFORGE_SCREENSHOTS_DIR is set."""
    target = os.environ.get("CHATFORGE_SCREENSHOTS_DIR")

    def take(page: Page, name: str, *, full_page: bool = False) -> None:
        if target:
            Path(target).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(target) / f"{name}.png"), full_page=full_page)

    return take
