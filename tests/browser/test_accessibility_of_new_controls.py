"""axe-core audits (tests/browser/accessibility.py) of the chat page's
controls for versions, the conversation list and sharing, each in the state
that shows it: a question with two versions (‹ n / m ›), the title bar's ⋯
menu open, the share dialog with a link, the archived view with Restore,
and the shared page a visitor sees — on a desktop in the light theme and on
a 390 px phone in the dark one."""

from __future__ import annotations

import pytest
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect

from chatforge.conversations.models import Conversation, Run
from tests.browser.accessibility import assert_accessible
from tests.browser.chat_actions import ask, last_reply, open_chat
from tests.fakes.openai_server import Reply, last_user_text
from tests.support.stack import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _audit_new_controls(page: Page, browser: Browser, stack, browser_user, fake_model, username: str,
                        theme: str, **visitor_options) -> None:
    user = browser_user(username)
    model = fake_model(f"browser-a11y-new-{username}",
                       lambda body: Reply(text=f"Answer to: **{last_user_text(body)}**"))
    open_chat(page, stack, username)
    ask(page, model, "first question")
    wait_for(lambda: not Run.objects.filter(user=user).exclude(status__in=Run.TERMINAL).exists(),
             timeout=30, what="the run to be stored as ended")

    # Two versions of the question: the ‹ 2 / 2 › control.
    page.locator("article.user").first.get_by_role("button", name="Edit").click()
    page.locator(".edit-box textarea").fill("first question, edited")
    page.locator(".edit-box .save-edit").click()
    expect(page.locator("article.user .msg-header .versions .version-count")).to_have_text("2 / 2")
    expect(last_reply(page)).to_have_attribute("data-status", "completed")
    assert_accessible(page, name=f"a question with two versions ({theme})")

    # The title bar's menu, open.
    page.click("#conversation-menu-button")
    expect(page.get_by_role("menuitem", name="Share…")).to_be_visible()
    assert_accessible(page, name=f"the conversation menu, open ({theme})")

    # The share dialog with a link made.
    page.get_by_role("menuitem", name="Share…").click()
    expect(page.get_by_role("dialog", name="Share this conversation")).to_be_visible()
    page.click("#share-create")
    expect(page.locator("#share-link")).not_to_have_value("")
    url = page.locator("#share-link").input_value()
    assert_accessible(page, name=f"the share dialog with a link ({theme})")
    page.keyboard.press("Escape")
    expect(page.get_by_role("dialog")).to_be_hidden()

    # The archived view, with the conversation in it and its Restore button.
    Conversation.objects.filter(user=user).update(archived_at=timezone.now())
    page.reload()
    page.wait_for_selector("body[data-chat-ready]", state="attached")
    if page.locator("#sidebar-toggle").is_visible():
        page.click("#sidebar-toggle")
    page.get_by_role("button", name="Archived").click()
    expect(page.get_by_role("button", name="Restore").first).to_be_visible()
    assert_accessible(page, name=f"the archived conversations ({theme})")

    # The shared page, as a visitor who is not signed in sees it.
    context = browser.new_context(**visitor_options)
    try:
        visitor = context.new_page()
        assert visitor.goto(url).status == 200
        visitor.wait_for_selector("body[data-share-ready]", state="attached")
        expect(visitor.locator("article.assistant strong")).to_have_text("first question, edited")
        assert_accessible(visitor, name=f"the shared conversation ({theme})")
    finally:
        context.close()


def test_new_controls_desktop_light(page: Page, browser: Browser, stack, browser_user, fake_model):
    _audit_new_controls(page, browser, stack, browser_user, fake_model, "auditrix", "desktop, light",
                        viewport={"width": 1280, "height": 860})


def test_new_controls_phone_dark(phone_page: Page, browser: Browser, stack, browser_user, fake_model):
    _audit_new_controls(phone_page, browser, stack, browser_user, fake_model, "nightowl", "phone, dark",
                        viewport={"width": 390, "height": 844}, color_scheme="dark")
