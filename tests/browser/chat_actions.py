"""What a person does on the chat page, shared by the browser tests."""

from __future__ import annotations

from playwright.sync_api import Locator, Page


def send(page: Page, model: str, text: str) -> None:
    """Pick ``model``, type ``text`` and press Enter."""
    page.select_option("#model-select", model)
    page.fill("#message-input", text)
    page.keyboard.press("Enter")


def last_reply(page: Page) -> Locator:
    return page.locator("article.assistant").last
