"""The conversation list and the title bar in Chromium: date groups as
headings, the next page loaded as the list scrolls, pin, archive and
restore, Ctrl+K to search, export downloads, and the one-line title bar of a
390 px phone, whose menu works by keyboard."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from chatforge.conversations.models import Conversation, Message
from tests.browser.chat_actions import open_chat

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _conversations(user, titles_and_ages: list[tuple[str, timedelta]]) -> list[Conversation]:
    now = timezone.now()
    made = []
    for title, age in titles_and_ages:
        conversation = Conversation.objects.create(user=user, title=title)
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=now - age)
        made.append(conversation)
    return made


def items(page: Page):
    return page.locator("#conversation-list .conversation")


def test_groups_paging_pin_archive_and_restore(page: Page, stack, browser_user, screenshot):
    user = browser_user("lis")
    # 60 conversations: the first page is 50, the rest comes as the list scrolls.
    _conversations(user, [(f"Old chat {i:02d}", timedelta(days=400, minutes=i)) for i in range(56)])
    _conversations(user, [("Asked today", timedelta(minutes=5)), ("Asked yesterday", timedelta(days=1)),
                          ("Earlier this week", timedelta(days=4)), ("Earlier this month", timedelta(days=20))])
    open_chat(page, stack, "lis")

    headings = page.locator("#conversation-list h2")
    expect(headings.first).to_have_text("Today")
    assert headings.all_text_contents()[:4] == ["Today", "Yesterday", "Previous 7 days", "Previous 30 days"]
    month = (timezone.localtime() - timedelta(days=400)).strftime("%B %Y")
    expect(page.get_by_role("heading", name=month, exact=True)).to_be_visible()
    expect(items(page)).to_have_count(50)
    # Each group is a section named by its heading: a screen reader lists them.
    expect(page.get_by_role("region", name="Yesterday")).to_contain_text("Asked yesterday")
    screenshot(page, "conversation-list")

    items(page).nth(49).scroll_into_view_if_needed()
    expect(items(page)).to_have_count(60)
    expect(items(page).last).to_have_text("Old chat 55")

    # Pin: to the top, under "Pinned".
    page.get_by_role("button", name="Pin “Old chat 30”").click()
    expect(headings.first).to_have_text("Pinned")
    expect(items(page).first).to_have_text("Old chat 30")
    assert Conversation.objects.get(title="Old chat 30").pinned_at is not None
    page.get_by_role("button", name="Unpin “Old chat 30”").click()
    expect(headings.first).to_have_text("Today")

    # Archive: out of the list, into the archived view, and back with Restore.
    page.get_by_role("button", name="Archive “Asked yesterday”").click()
    expect(page.locator("#conversation-list")).not_to_contain_text("Asked yesterday")
    assert Conversation.objects.get(title="Asked yesterday").archived_at is not None
    page.click("#show-archived")
    expect(page.locator("#show-archived")).to_have_attribute("aria-pressed", "true")
    expect(items(page)).to_have_count(1)
    expect(headings).to_have_text(["Archived"])
    screenshot(page, "conversation-list-archived")
    page.get_by_role("button", name="Restore “Asked yesterday”").click()
    expect(page.locator("#no-conversations")).to_have_text("No archived conversations.")
    page.click("#show-archived")
    expect(page.get_by_role("region", name="Yesterday")).to_contain_text("Asked yesterday")
    assert Conversation.objects.get(title="Asked yesterday").archived_at is None


def test_ctrl_k_searches_archived_ones_too(page: Page, stack, browser_user):
    user = browser_user("kay")
    kept, archived = _conversations(user, [("Porto trip", timedelta(hours=1)), ("Porto wine", timedelta(hours=2))])
    Conversation.objects.filter(pk=archived.pk).update(archived_at=timezone.now())
    open_chat(page, stack, "kay")
    expect(items(page)).to_have_count(1)
    box = page.locator("#conversation-search")
    assert "Ctrl+K" in box.get_attribute("placeholder")
    page.locator("#message-input").focus()
    page.keyboard.press("Control+k")
    expect(box).to_be_focused()
    page.keyboard.type("porto")
    expect(items(page)).to_have_count(2)
    expect(page.locator("#conversation-list .conversation", has_text="Porto wine")).to_contain_text("archived")
    expect(page.locator("#conversation-list .conversation", has_text="Porto trip")).not_to_contain_text("archived")


def _open_menu_and_choose(page: Page, item: str) -> None:
    page.click("#conversation-menu-button")
    page.get_by_role("menuitem", name=item).click()


def test_the_menu_pins_archives_and_exports(page: Page, stack, browser_user, tmp_path):
    user = browser_user("exp")
    (conversation,) = _conversations(user, [("Export me", timedelta(minutes=1))])
    question = Message.objects.create(conversation=conversation, role="user", content="What is 6*7?")
    Message.objects.create(conversation=conversation, role="assistant", parent=question, content="42", model="demo")
    open_chat(page, stack, "exp")
    page.goto(f"{stack.http_url}/c/{conversation.id}/")
    page.wait_for_selector("body[data-chat-ready]", state="attached")

    _open_menu_and_choose(page, "Pin")
    expect(page.locator("#conversation-list h2").first).to_have_text("Pinned")
    expect(page.locator("#pin-conversation")).to_have_text("Unpin")

    with page.expect_download() as download_info:
        _open_menu_and_choose(page, "Export Markdown")
    download = download_info.value
    assert download.suggested_filename == "Export-me.md"
    text = (tmp_path / "export.md")
    download.save_as(text)
    assert text.read_text().startswith("# Export me\n") and "What is 6*7?" in text.read_text()

    with page.expect_download() as download_info:
        _open_menu_and_choose(page, "Export JSON")
    download = download_info.value
    assert download.suggested_filename == "Export-me.json"
    download.save_as(tmp_path / "export.json")
    data = json.loads((tmp_path / "export.json").read_text())
    assert [m["content"] for m in data["messages"]] == ["What is 6*7?", "42"]

    _open_menu_and_choose(page, "Archive")
    expect(page.locator("#archive-conversation")).to_have_text("Restore")
    expect(page.locator("#conversation-list")).not_to_contain_text("Export me")
    assert Conversation.objects.get(pk=conversation.pk).archived_at is not None
    _open_menu_and_choose(page, "Restore")
    expect(page.locator("#conversation-list")).to_contain_text("Export me")


def test_a_phone_header_is_one_line_and_its_menu_works_by_keyboard(phone_page: Page, stack, browser_user,
                                                                    screenshot):
    page = phone_page
    user = browser_user("pho")
    long_title = "A very long conversation title that cannot possibly fit on one line of a phone screen"
    (conversation,) = _conversations(user, [(long_title, timedelta(minutes=1))])
    Message.objects.create(conversation=conversation, role="user", content="Hello")
    open_chat(page, stack, "pho")
    page.goto(f"{stack.http_url}/c/{conversation.id}/")
    page.wait_for_selector("body[data-chat-ready]", state="attached")

    toggle = page.locator("#sidebar-toggle").bounding_box()
    menu_button = page.locator("#conversation-menu-button").bounding_box()
    title = page.locator("#conversation-title").bounding_box()
    row = page.locator(".title-row").bounding_box()
    assert toggle["y"] == menu_button["y"]  # side by side
    assert row["height"] < 2 * max(toggle["height"], menu_button["height"])  # one line
    assert title["height"] < 1.6 * toggle["height"]  # the title is not wrapped
    assert menu_button["x"] + menu_button["width"] <= 390
    assert page.locator("#conversation-title").evaluate("(el) => el.scrollWidth > el.clientWidth")  # an ellipsis
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "chat-header-phone")

    button = page.locator("#conversation-menu-button")
    expect(button).to_have_attribute("aria-haspopup", "menu")
    expect(button).to_have_accessible_name("Conversation actions")
    button.focus()
    page.keyboard.press("Enter")
    expect(button).to_have_attribute("aria-expanded", "true")
    expect(page.get_by_role("menuitem", name="Rename")).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(page.get_by_role("menuitem", name="Pin")).to_be_focused()
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")
    expect(page.get_by_role("menuitem", name="Delete")).to_be_focused()
    screenshot(page, "chat-header-menu-phone")
    page.keyboard.press("Escape")
    expect(page.locator("#conversation-menu")).to_be_hidden()
    expect(button).to_be_focused()
    expect(button).to_have_attribute("aria-expanded", "false")

    # Space opens it too; Enter on an item does what it says.
    page.keyboard.press(" ")
    expect(page.get_by_role("menuitem", name="Rename")).to_be_focused()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    expect(page.locator("#pin-conversation")).to_have_text("Unpin")
    assert Conversation.objects.get(pk=conversation.pk).pinned_at is not None
