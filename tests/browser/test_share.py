"""Sharing in Chromium: the Share dialog (labelled, modal, Esc closes it and
the focus goes back), its link opened in a new browser context with nobody
signed in, on a desktop and on a dark 390 px phone, and Revoke, after which
the link says it was revoked (404)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page, expect

from chatforge.conversations.models import Conversation, ConversationShare, Message
from tests.browser.chat_actions import open_chat
from tests.browser.conftest import PHONE

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

OWNER = "owner-sasha-77"
ROUNDS = [{"iteration": 0, "assistant_response": "Let me compute that.",
           "tool_calls": [{"id": "c1", "name": "calculator", "arguments": "{\"expression\": \"17*23\"}"}],
           "results": [{"tool_call_id": "c1", "name": "calculator", "output": "{\"result\": 391}",
                        "status": "success", "execution_time_ms": 2}]}]


def _conversation(user) -> Conversation:
    conversation = Conversation.objects.create(user=user, title="Sums to share")
    Conversation.objects.create(user=user, title="Private other chat")
    question = Message.objects.create(conversation=conversation, role="user", content="What is 17*23?")
    Message.objects.create(conversation=conversation, role="assistant", parent=question, model="demo",
                           content="## Result\n\nIt is **391**.", tool_rounds=ROUNDS)
    return conversation


def _open_share_dialog(page: Page) -> None:
    page.click("#conversation-menu-button")
    page.get_by_role("menuitem", name="Share…").click()
    expect(page.get_by_role("dialog", name="Share this conversation")).to_be_visible()


def _check_shared_page(page: Page, url: str) -> None:
    response = page.goto(url)
    assert response.status == 200
    assert response.headers["x-robots-tag"] == "noindex, nofollow"
    page.wait_for_selector("body[data-share-ready]", state="attached")
    expect(page.locator("h1")).to_have_text("Sums to share")
    reply = page.locator("article.assistant")
    expect(reply.locator("h2")).to_have_text("Result")  # Markdown, rendered
    expect(reply.locator("strong")).to_have_text("391")
    card = reply.locator(".tool-card")
    expect(card.locator(".tool-name")).to_have_text("calculator")
    card.locator("summary").click()
    expect(card.locator(".tool-output")).to_contain_text('"result": 391')
    expect(page.locator("article.user .round-text")).to_have_text("What is 17*23?")
    content = page.content()
    for absent in (OWNER, "Private other chat", "Log out", "Settings"):
        assert absent not in content, absent
    assert page.locator("a").evaluate_all("(links) => links.map((a) => a.getAttribute('href'))") == ["/"]
    assert page.locator("button, input, textarea").evaluate_all(
        "(nodes) => nodes.map((n) => n.id).filter((id) => id !== 'theme-toggle')") == []  # read-only


def test_share_open_logged_out_and_revoke(page: Page, browser: Browser, stack, browser_user, screenshot):
    user = browser_user(OWNER)
    conversation = _conversation(user)
    open_chat(page, stack, OWNER)
    page.goto(f"{stack.http_url}/c/{conversation.id}/")
    page.wait_for_selector("body[data-chat-ready]", state="attached")

    _open_share_dialog(page)
    expect(page.locator("#share-create")).to_be_focused()
    page.click("#share-create")
    link = page.locator("#share-link")
    expect(link).not_to_have_value("")
    url = link.input_value()
    share = ConversationShare.objects.get(conversation=conversation)
    assert url.startswith(f"{stack.http_url}/share/{share.id}:")
    expect(page.locator("#share-list .share-item")).to_have_count(1)
    screenshot(page, "share-dialog")
    # Modal: Tab stays in the dialog; Esc closes it and the focus goes back to the menu button.
    for _ in range(8):
        page.keyboard.press("Tab")
        assert page.evaluate("document.getElementById('share-dialog').contains(document.activeElement)")
    page.keyboard.press("Escape")
    expect(page.get_by_role("dialog")).to_be_hidden()
    expect(page.locator("#conversation-menu-button")).to_be_focused()

    # Nobody signed in, on a desktop and on a phone in the dark.
    for options in ({"viewport": {"width": 1280, "height": 860}}, {"viewport": PHONE, "color_scheme": "dark"}):
        context = browser.new_context(**options)
        try:
            visitor = context.new_page()
            _check_shared_page(visitor, url)
            if options.get("color_scheme") == "dark":
                assert visitor.evaluate("document.documentElement.dataset.theme") == "dark"
                assert visitor.evaluate("document.documentElement.scrollWidth") <= 390
                screenshot(visitor, "share-page-phone", full_page=True)
            else:
                screenshot(visitor, "share-page")
        finally:
            context.close()

    _open_share_dialog(page)
    expect(page.locator("#share-list .share-item")).to_have_count(1)
    page.get_by_role("button", name="Revoke").click()
    expect(page.locator("#share-list .share-item.revoked")).to_have_count(1)
    expect(page.locator("#share-list")).to_contain_text("revoked")
    assert ConversationShare.objects.get(pk=share.pk).revoked_at is not None
    page.click("#share-close")

    context = browser.new_context()
    try:
        visitor = context.new_page()
        response = visitor.goto(url)
        assert response.status == 404
        expect(visitor.locator("h1")).to_have_text("This link was revoked")
        assert "391" not in visitor.content()
    finally:
        context.close()
