"""The chat page's tools in a real browser: keyboard (Esc stops, Ctrl+Shift+O
starts anew), timestamps, editing a question and regenerating the answer,
searching, renaming and deleting conversations, a 390 px phone layout with
the sidebar as a drawer, and the dark theme."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from chatforge.conversations.models import Conversation, Message
from tests.browser.chat_actions import ask, last_reply, send
from tests.fakes.openai_server import Reply, last_user_text

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def echo_model(fake_model, name: str) -> str:
    """Answers every question with "Answer to: <question>"."""
    return fake_model(name, lambda body: Reply(text=f"Answer to: {last_user_text(body)}"))


def test_esc_stops_a_run_and_ctrl_shift_o_starts_a_new_conversation(page: Page, log_in, browser_user, fake_model):
    browser_user("kit")
    model = fake_model("browser-esc", [Reply(text=" ".join(f"w{i}" for i in range(200)), chunk_delay_s=0.05)])
    log_in(page, "kit")
    send(page, model, "Talk for a while")
    expect(last_reply(page).locator(".round-text")).to_contain_text("w3 ")
    page.keyboard.press("Escape")
    expect(last_reply(page)).to_have_attribute("data-status", "cancelled")
    expect(page).to_have_url(re.compile(r"/c/[0-9a-f-]{36}/$"))

    page.keyboard.press("Control+Shift+O")
    expect(page).to_have_url(re.compile(r"/$"))
    expect(page.locator("#conversation-title")).to_have_text("New conversation")
    expect(page.locator("#message-input")).to_be_focused()


def test_edit_a_question_then_regenerate_the_answer(page: Page, log_in, browser_user, fake_model):
    user = browser_user("eve")
    model = echo_model(fake_model, "browser-edit")
    log_in(page, "eve")
    ask(page, model, "first question")
    expect(ask(page, model, "second question").locator(".round-text")).to_have_text("Answer to: second question")
    expect(page.locator("article.user time").first).to_be_visible()  # timestamps

    # Edit the first question: a new version of it, whose branch the page shows.
    page.locator("article.user").first.locator(".edit-message").click()
    page.locator(".edit-box textarea").fill("first question, edited")
    page.locator(".edit-box .save-edit").click()
    expect(page.locator("article.user .round-text")).to_have_text(["first question, edited"])
    expect(last_reply(page).locator(".round-text")).to_have_text("Answer to: first question, edited")
    expect(last_reply(page)).to_have_attribute("data-status", "completed")

    # Regenerate the last answer: same question, a new run, a second version of the answer.
    page.reload()
    first_answer = Message.objects.get(conversation__user=user, content="Answer to: first question, edited")
    last_reply(page).locator(".regenerate").click()
    expect(last_reply(page).locator(".version-count")).to_have_text("2 / 2")
    expect(last_reply(page)).to_have_attribute("data-status", "completed")
    expect(page.locator("article.user .round-text")).to_have_text(["first question, edited"])
    conversation = Conversation.objects.get(user=user)
    # Nothing is deleted: both questions' first versions and every answer stay.
    assert sorted(m.content for m in conversation.messages.all()) == sorted([
        "first question", "Answer to: first question", "second question", "Answer to: second question",
        "first question, edited", "Answer to: first question, edited", "Answer to: first question, edited"])
    expect(last_reply(page)).not_to_have_attribute("data-message-id", str(first_answer.id))  # a new answer


def test_an_answer_finished_live_has_its_time_and_regenerate(page: Page, log_in, browser_user, fake_model):
    """What a reload shows for the last answer (its time, Regenerate) is there
    as soon as it has streamed to its end, and Regenerate works from there."""
    user = browser_user("liv")
    model = echo_model(fake_model, "browser-live-regenerate")
    log_in(page, "liv")
    answers = page.locator("article.assistant")
    ask(page, model, "first question")
    expect(answers.nth(0).locator(".msg-header time")).to_be_visible()
    expect(answers.nth(0).locator(".regenerate")).to_be_visible()

    ask(page, model, "second question")
    second = answers.nth(1)
    expect(second.locator(".msg-header time")).to_be_visible()
    expect(second.locator(".regenerate")).to_be_visible()
    expect(page.locator(".regenerate")).to_have_count(1)  # the last answer's only
    old_answer = Message.objects.get(conversation__user=user, content="Answer to: second question")
    expect(second).to_have_attribute("data-message-id", str(old_answer.id))

    second.locator(".regenerate").click()  # the new answer streams in its place
    expect(second.locator(".version-count")).to_have_text("2 / 2")
    expect(answers).to_have_count(2)
    expect(second).to_have_attribute("data-status", "completed")
    expect(second.locator(".round-text")).to_have_text("Answer to: second question")
    expect(second.locator(".msg-header time")).to_be_visible()
    expect(second.locator(".regenerate")).to_be_visible()
    conversation = Conversation.objects.get(user=user)
    assert [m.content for m in conversation.messages.order_by("created_at")] == [
        "first question", "Answer to: first question", "second question", "Answer to: second question",
        "Answer to: second question"]
    expect(second).not_to_have_attribute("data-message-id", str(old_answer.id))  # a new answer, beside the old one


def test_search_rename_and_delete_conversations(page: Page, log_in, browser_user, fake_model):
    user = browser_user("ren")
    model = echo_model(fake_model, "browser-rename")
    log_in(page, "ren")
    ask(page, model, "Planning a trip to Porto")
    page.goto(page.url.split("/c/")[0] + "/")
    ask(page, model, "A recipe for carbonara")

    page.fill("#conversation-search", "carbonara")
    expect(page.locator("#conversation-list .conversation")).to_have_count(1)
    expect(page.locator("#conversation-list .conversation .title")).to_have_text("A recipe for carbonara")
    page.fill("#conversation-search", "")
    expect(page.locator("#conversation-list .conversation")).to_have_count(2)

    page.click("#conversation-menu-button")  # Rename and Delete are in the title bar's menu
    page.click("#rename-conversation")
    page.fill("#conversation-title-input", "Pasta night")
    page.keyboard.press("Enter")
    expect(page.locator("#conversation-title")).to_have_text("Pasta night")
    expect(page.locator("#conversation-list .conversation.current .title")).to_have_text("Pasta night")
    assert Conversation.objects.filter(user=user, title="Pasta night").exists()

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#conversation-menu-button")
    page.click("#delete-conversation")
    expect(page).to_have_url(re.compile(r"/$"))
    expect(page.locator("#conversation-list .conversation")).to_have_count(1)
    assert list(Conversation.objects.filter(user=user).values_list("title", flat=True)) == [
        "Planning a trip to Porto"]


def test_a_phone_sized_screen_and_the_dark_theme(browser, stack, log_in, browser_user, fake_model):
    browser_user("pip")
    model = fake_model("browser-phone", [Reply(text="## Short answer\n\nA *readable* reply, with `code`.")])
    context = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme="dark")
    page = context.new_page()
    try:
        log_in(page, "pip")
        assert page.evaluate("document.documentElement.dataset.theme") == "dark"  # follows the system
        send(page, model, "Hello from a phone")
        expect(last_reply(page)).to_have_attribute("data-status", "completed")
        # Nothing is cut off: no sideways scrolling at 390 px.
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        sidebar = page.locator("#conversation-sidebar")
        assert not sidebar.evaluate("(el) => el.getBoundingClientRect().right > 0")  # a closed drawer
        page.click("#sidebar-toggle")
        expect(sidebar).to_be_in_viewport()
        expect(page.locator("#conversation-list .conversation")).to_have_count(1)
        page.keyboard.press("Escape")
        expect(sidebar).not_to_be_in_viewport()

        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        page.click("#theme-toggle")  # auto → dark (explicit)
        page.click("#theme-toggle")  # dark → light
        assert page.evaluate("document.documentElement.dataset.theme") == "light"
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") != background
        page.reload()
        assert page.evaluate("document.documentElement.dataset.theme") == "light"  # remembered
    finally:
        context.close()
