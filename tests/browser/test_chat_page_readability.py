"""Can the chat page be read: tool cards (and their approval question) in the
dark theme, on a desktop and on a phone; tool cards with long names,
arguments and outputs on a 390 px screen; the edit box's Send button in
both themes. Contrast is WCAG's ratio computed from the styles Chromium
applied (tests/browser/readability.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from chatforge.catalog.models import ToolDefinition
from tests.browser.chat_actions import ask, last_reply, send
from tests.browser.conftest import PHONE
from tests.browser.readability import sticking_out, unreadable
from tests.fakes.openai_server import Reply, last_user_text, tool_results

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

DESKTOP = {"width": 1280, "height": 860}
LONG_TOOL = "lookup_customer_order_history_by_reference_number"
# No spaces to break at: only a rule that breaks anywhere keeps it in a card.
LONG_ARGUMENT = "https://shop.example.com/orders/" + "a1b2c3d4e5" * 20
LONG_OUTPUT = {"orders": [{"reference": "ORD-" + "7" * 60, "status": "delivered",
                           "tracking": "https://track.example.com/" + "z9" * 60}]}


def tools_model(body) -> Reply:
    """Calls three tools at once (one asks for approval), then answers."""
    if not tool_results(body):
        return Reply(text="Let me check those.", tool_calls=[
            (LONG_TOOL, {"reference": "ORD-" + "7" * 60}),
            ("echo", {"text": LONG_ARGUMENT}),
            ("send_note", {"text": "Your order is on its way"}),
        ])
    return Reply(text="Your order was delivered; I sent the team a note.")


@pytest.fixture
def tools_conversation(fake_model):
    """A model whose answer has tool cards of every kind; returns its name."""
    ToolDefinition.objects.create(
        name=LONG_TOOL, description="An order's history.", kind="mock", mock_response=LONG_OUTPUT,
        parameters={"type": "object", "properties": {"reference": {"type": "string"}}, "required": ["reference"]})
    ToolDefinition.objects.create(
        name="send_note", description="Send a note to the team.", kind="mock", mock_response={"sent": True},
        parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        side_effects="not_idempotent", requires_approval=True)
    return fake_model("browser-readability", tools_model)


@pytest.fixture
def new_page(browser: Browser) -> Iterator[Callable[[dict, str], Page]]:
    """Pages of a given size and colour scheme, each checked as the ``page``
    fixture checks its page: no JavaScript error, no CSP violation."""
    contexts = []
    problems: list[str] = []

    def make(viewport: dict, color_scheme: str) -> Page:
        context = browser.new_context(viewport=viewport, color_scheme=color_scheme)
        context.set_default_timeout(30_000)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda exc: problems.append(f"JavaScript error: {exc}"))
        page.on("console", lambda message: problems.append(message.text)
                if message.type == "error" and "Content Security Policy" in message.text else None)
        return page

    yield make
    for context in contexts:
        context.close()
    assert problems == []


def wait_for_the_approval_question(page: Page):
    reply = last_reply(page)
    expect(reply.locator(".tool-card[data-tool-name=send_note]")).to_have_attribute("data-status", "awaiting_approval")
    expect(reply.locator(".tool-card[data-tool-name=echo]")).to_have_attribute("data-status", "success")
    expect(reply.locator(f".tool-card[data-tool-name={LONG_TOOL}]")).to_have_attribute("data-status", "success")
    return reply


def approve_and_open_every_card(page: Page):
    reply = last_reply(page)
    reply.locator(".tool-card[data-tool-name=send_note] .approve-tool").click()
    expect(reply).to_have_attribute("data-status", "completed")
    cards = reply.locator(".tool-card")
    expect(cards).to_have_count(3)
    for i in range(3):  # folded when the run ended
        card = cards.nth(i)
        if card.get_attribute("open") is None:
            card.locator("summary").click()
        expect(card).to_have_attribute("open", "")
    return reply


def card_parts(card) -> dict:
    return {
        "name": card.locator(".tool-name"),
        "arguments (summary)": card.locator(".tool-args-inline"),
        "status badge": card.locator(".tool-status"),
        "duration": card.locator(".tool-duration"),
        "arguments": card.locator(".tool-args"),
        "output": card.locator(".tool-output"),
        "label": card.locator(".label").first,
    }


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_tool_cards_are_readable_in_the_dark_theme(new_page, log_in, browser_user, tools_conversation, viewport):
    browser_user("nox")
    page = new_page(viewport, "dark")
    log_in(page, "nox")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    send(page, tools_conversation, "Where is my order? Tell the team.")

    reply = wait_for_the_approval_question(page)
    question = reply.locator(".tool-card[data-tool-name=send_note]")
    asking = {
        "question": question.locator(".approval-question"),
        "reason box": question.locator(".approval-reason"),
        "approve": question.locator(".approve-tool"),
        "deny": question.locator(".deny-tool"),
        **card_parts(question),
    }
    asking.pop("duration")  # empty while it waits
    assert unreadable(asking) == {}

    reply = approve_and_open_every_card(page)
    for card in reply.locator(".tool-card").all():
        assert unreadable(card_parts(card)) == {}, card.get_attribute("data-tool-name")
    decided = reply.locator(".tool-card[data-tool-name=send_note] .approval-outcome")
    expect(decided).to_have_text("Approved by nox.")
    assert unreadable({"decision": decided}) == {}


def test_tool_cards_fit_a_phone_screen(new_page, log_in, browser_user, tools_conversation, screenshot):
    browser_user("pim")
    page = new_page(PHONE, "dark")
    log_in(page, "pim")
    send(page, tools_conversation, "Where is my order? Tell the team.")

    def assert_fits() -> None:
        assert sticking_out(page) == [], "\n".join(sticking_out(page))
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        history = page.locator("#history")
        assert history.evaluate("(el) => el.scrollWidth <= el.clientWidth")  # no sideways scrolling
        message = last_reply(page).bounding_box()
        for card in last_reply(page).locator(".tool-card").all():
            box = card.bounding_box()
            assert box["x"] >= message["x"] and box["x"] + box["width"] <= message["x"] + message["width"], (
                card.get_attribute("data-tool-name"), box, message)

    wait_for_the_approval_question(page)  # cards open, one asking
    assert_fits()
    page.click("#tools-summary")  # the tool picker (a long tool name in it) opens inside the screen too
    expect(page.locator(".tool-picker-list")).to_be_visible()
    assert_fits()
    page.click("#tools-summary")
    approve_and_open_every_card(page)
    assert_fits()
    for name in (LONG_TOOL, "send_note"):  # the screenshot shows the reply from its top, echo's card open
        last_reply(page).locator(f".tool-card[data-tool-name={name}] summary").click()
    last_reply(page).evaluate("(el) => el.scrollIntoView({block: 'start'})")
    screenshot(page, "chat-phone-dark")


@pytest.mark.parametrize("color_scheme", ["light", "dark"])
def test_the_edit_boxs_send_button_is_readable(new_page, log_in, browser_user, fake_model, color_scheme):
    browser_user("eda")
    model = fake_model("browser-edit-contrast", lambda body: Reply(text=f"Answer to: {last_user_text(body)}"))
    page = new_page(DESKTOP, color_scheme)
    log_in(page, "eda")
    assert page.evaluate("document.documentElement.dataset.theme") == color_scheme
    ask(page, model, "a question to edit")
    page.locator("article.user .edit-message").click()
    box = page.locator(".edit-box")
    expect(box.locator(".save-edit")).to_be_visible()
    assert unreadable({"send": box.locator(".save-edit"), "cancel": box.locator(".cancel-edit"),
                       "note": box.locator(".hint")}) == {}
