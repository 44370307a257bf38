"""What a person does on the chat page, shared by the browser tests."""

from __future__ import annotations

from playwright.sync_api import Locator, Page, expect

from tests.browser.conftest import PASSWORD


def open_chat(page: Page, stack, username: str, *, model: str | None = None) -> None:
    """Sign in as ``username`` and wait until the chat page is ready (with
    ``model`` picked, when given)."""
    page.goto(f"{stack.http_url}/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("body[data-chat-ready]", state="attached")
    if model is not None:
        page.select_option("#model-select", model)


def send(page: Page, model: str, text: str) -> None:
    """Pick ``model``, type ``text`` and press Enter — once the page's script
    handles Enter: pressed earlier, it only adds a line to the box (seen on
    busy cores, where the vendored libraries take a while to load)."""
    page.wait_for_selector("body[data-chat-ready]", state="attached")
    page.select_option("#model-select", model)
    page.fill("#message-input", text)
    page.keyboard.press("Enter")


def last_reply(page: Page) -> Locator:
    return page.locator("article.assistant").last


def ask(page: Page, model: str, text: str) -> Locator:
    """Send ``text`` and wait for its answer to complete; the answer's article."""
    send(page, model, text)
    reply = last_reply(page)
    expect(reply).to_have_attribute("data-status", "completed")
    return reply
