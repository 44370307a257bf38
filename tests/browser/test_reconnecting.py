"""The chat page when a run's worker is lost: ``run.reconnecting`` shows
"Reconnecting the run…" in the answer's status notice until the run's next
event (docs/events.md), on a desktop and on a phone in dark mode.

The event is published into the stack's event log by the test (the stack
and the test share the event log's Redis), while the run waits on a slow
tool call and nothing else is sent: what the page does with it is what is
tested here; tests/integration/test_worker_liveness.py shows the engine
sending it when a worker is really killed."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from chatforge.conversations.models import Run
from orchestration.event_log.events import RunRef, run_reconnecting
from tests.browser.accessibility import assert_accessible
from tests.browser.chat_actions import last_reply, send
from tests.fakes.openai_server import Reply

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _lost_worker_notice(page: Page, log_in, browser_user, fake_model, screenshot, *, user: str, shot: str) -> None:
    browser_user(user)
    model = fake_model(f"browser-reconnecting-{user}", [
        Reply(text="Let me look.", tool_calls=[("slow_sleep", {"ms": 8000})]),
        Reply(text="Here it is."),
    ])
    log_in(page, user)
    send(page, model, "Look it up")
    reply = last_reply(page)
    card = reply.locator(".tool-card[data-tool-name=slow_sleep]")
    expect(card).to_have_attribute("data-status", "running")
    run_id = reply.get_attribute("data-run-id")
    run = Run.objects.get(pk=run_id)

    run_reconnecting(RunRef(run_id=run_id, conversation_id=str(run.conversation_id)), iteration=0, step="tool_call",
                     tool_call_id=card.get_attribute("data-tool-id"),
                     reason="The worker running this step stopped answering; the step is being run again.")

    notice = reply.locator(".notice")
    expect(notice).to_have_text("Reconnecting the run…")
    expect(notice).to_have_attribute("role", "status")
    screenshot(page, shot)
    assert_accessible(page, name=f"{shot}: the reconnecting notice")
    # The call's output is the run's next event: the notice goes with it.
    expect(card).to_have_attribute("data-status", "success", timeout=30_000)
    expect(notice).to_have_text("")
    expect(reply).to_have_attribute("data-status", "completed")


def test_the_reconnecting_notice_shows_until_the_run_goes_on(page: Page, log_in, browser_user, fake_model, screenshot):
    _lost_worker_notice(page, log_in, browser_user, fake_model, screenshot, user="rita", shot="chat-reconnecting")


def test_the_reconnecting_notice_on_a_phone_in_dark_mode(phone_page: Page, log_in, browser_user, fake_model,
                                                       screenshot):
    _lost_worker_notice(phone_page, log_in, browser_user, fake_model, screenshot, user="rafa",
                        shot="chat-reconnecting-phone-dark")
