"""Approving and denying a tool call from the chat page: the call's card asks
(Approve / Deny, with an optional reason), the run waits, and the decision
made in the browser lets the run go on. The card then says who decided, and
a denied call reads *denied*, live and after a reload."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from chatforge.catalog.models import ToolDefinition
from chatforge.conversations.models import ToolInvocation
from tests.browser.chat_actions import last_reply, send
from tests.fakes.openai_server import Reply, tool_results

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def note_model(body) -> Reply:
    """Asks to send a note, then says what came of it."""
    results = tool_results(body)
    if not results:
        return Reply(text="I'll send it.", tool_calls=[("send_note", {"text": "hi team"})])
    output = results[-1]["content"]
    return Reply(text="Not sent: you declined." if "declined" in output else f"Sent: {output}")


@pytest.fixture
def send_note():
    ToolDefinition.objects.create(
        name="send_note", description="Send a note to the team.", kind="mock", mock_response={"sent": True},
        parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        side_effects="not_idempotent", requires_approval=True)


def test_approve_a_call_from_its_tool_card(page: Page, log_in, browser_user, fake_model, send_note, screenshot):
    browser_user("kim")
    model = fake_model("browser-approval", note_model)
    log_in(page, "kim")
    send(page, model, "Tell the team hi")

    card = last_reply(page).locator('.tool-card[data-tool-name="send_note"]')
    expect(card).to_have_attribute("data-status", "awaiting_approval")
    expect(card.locator(".approval-question")).to_contain_text("asks for your approval")
    screenshot(page, "tool-approval")
    assert ToolInvocation.objects.get(name="send_note").status == "awaiting_approval"
    card.locator(".approve-tool").click()

    expect(last_reply(page)).to_have_attribute("data-status", "completed")
    expect(last_reply(page).locator(".round-text").last).to_have_text('Sent: {"sent":true}')
    expect(card.locator(".approval-outcome")).to_have_text("Approved by kim.")
    expect(card.locator(".approve-tool")).to_be_hidden()
    expect(card.locator(".tool-status")).to_have_text("success")

    page.reload()  # the stored answer still says who approved
    stored = last_reply(page).locator('.tool-card[data-tool-name="send_note"]')
    expect(stored).to_have_attribute("data-status", "success")
    stored.locator("summary").click()
    expect(stored.locator(".approval-outcome")).to_have_text("Approved by kim.")


def test_deny_with_a_reason_after_a_reload(page: Page, log_in, browser_user, fake_model, send_note):
    browser_user("lou")
    model = fake_model("browser-denial", note_model)
    log_in(page, "lou")
    send(page, model, "Tell the team hi")
    expect(last_reply(page).locator(".tool-card")).to_have_attribute("data-status", "awaiting_approval")

    page.reload()  # the question is still there: the page resumes the waiting run
    card = last_reply(page).locator('.tool-card[data-tool-name="send_note"]')
    expect(card).to_have_attribute("data-status", "awaiting_approval")
    card.locator(".approval-reason").fill("Not before Monday.")
    card.locator(".deny-tool").click()

    expect(last_reply(page)).to_have_attribute("data-status", "completed")
    expect(last_reply(page).locator(".round-text").last).to_have_text("Not sent: you declined.")
    denied_as_it_should(card, "Denied by lou (Not before Monday.).")
    invocation = ToolInvocation.objects.get(name="send_note")
    assert "Not before Monday." in invocation.output
    assert invocation.status == "error"  # what the model reads; the page says what happened

    page.reload()  # the stored answer says the same
    stored = last_reply(page).locator('.tool-card[data-tool-name="send_note"]')
    expect(stored).to_have_attribute("data-status", "denied")
    stored.locator("summary").click()
    denied_as_it_should(stored, "Denied by lou (Not before Monday.).")


def denied_as_it_should(card, outcome: str) -> None:
    """A denied call reads *denied* (not a red *error*), and who decided."""
    expect(card).to_have_attribute("data-status", "denied")
    expect(card.locator(".tool-status")).to_have_text("denied")
    expect(card.locator(".tool-status")).to_have_attribute("data-status", "denied")
    expect(card.locator(".approval-outcome")).to_have_text(outcome)
    expect(card.locator(".tool-output-label")).to_have_text("Output")
