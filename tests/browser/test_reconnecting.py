"""The chat page when a run's worker is lost: ``run.reconnecting`` shows
"Reconnecting the run…" in the answer's status notice until the run's next
event (docs/events.md, "When a worker is lost"), on a desktop and on a
phone in dark mode.

The event is published into the stack's event log by the test (the test
process and the stack share the event log's Redis: tests/support/stack.py)
while the run's second model turn is held at the fake LLM, so nothing else
is sent until the test lets the turn answer: the page's handling is what is
tested here; tests/integration/test_worker_liveness.py shows the engine
sending the event when a worker is really lost."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from chatforge.conversations.models import Run
from orchestration.event_log.events import RunRef, run_reconnecting
from tests.browser.accessibility import assert_accessible
from tests.browser.chat_actions import last_reply, send
from tests.fakes.openai_server import Reply, round_of

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# Only a safety net, so a failing test never leaves the model request open
# for long; the test releases the turn itself (below the stack's 60 s idle
# timeout for a model stream).
_HOLD_AT_MOST_S = 45.0


class SecondTurnHeld:
    """A fake model script: the first turn says a few words and calls
    ``echo``; the second waits for ``release`` (``arrived`` is set once the
    engine asked for it), then streams its answer."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.release = threading.Event()

    def __call__(self, body: dict[str, Any]) -> Reply:
        if round_of(body) == 0:
            return Reply(text="Let me look that up.", tool_calls=[("echo", {"text": "hello"})])
        self.arrived.set()
        self.release.wait(_HOLD_AT_MOST_S)
        return Reply(text="Here it is: hello.")


def _lost_worker_notice(page: Page, log_in, browser_user, fake_model, screenshot, *, user: str, shot: str) -> None:
    browser_user(user)
    script = SecondTurnHeld()
    model = fake_model(f"browser-reconnecting-{user}", script)
    log_in(page, user)
    try:
        send(page, model, "Echo hello")
        reply = last_reply(page)
        expect(reply.locator(".tool-card[data-tool-name=echo]")).to_have_attribute("data-status", "success")
        assert script.arrived.wait(60), "the run's second model turn never reached the fake LLM"
        run_id = reply.get_attribute("data-run-id")
        run = Run.objects.get(pk=run_id)

        run_reconnecting(RunRef(run_id=run_id, conversation_id=str(run.conversation_id)), iteration=1,
                         step="llm_turn", tool_call_id=None,
                         reason="The worker running this step stopped answering; the step is being run again.")

        notice = reply.locator(".msg-header .notice")
        expect(notice).to_have_text("Reconnecting the run…")
        expect(notice).to_have_attribute("role", "status")
        expect(notice).to_have_attribute("aria-live", "polite")
        expect(notice).to_be_visible()
        screenshot(page, shot)
        assert_accessible(page, name=f"{shot}: the reconnecting notice")
    finally:
        script.release.set()
    # The turn's first delta is the run's next event: the notice goes with it.
    expect(reply).to_contain_text("Here it is: hello.")
    expect(notice).to_have_text("")
    expect(reply).to_have_attribute("data-status", "completed")
    expect(notice).to_have_text("")


def test_the_reconnecting_notice_shows_until_the_run_goes_on(page: Page, log_in, browser_user, fake_model, screenshot):
    _lost_worker_notice(page, log_in, browser_user, fake_model, screenshot, user="rita", shot="chat-reconnecting")


def test_the_reconnecting_notice_on_a_phone_in_dark_mode(phone_page: Page, log_in, browser_user, fake_model,
                                                       screenshot):
    _lost_worker_notice(phone_page, log_in, browser_user, fake_model, screenshot, user="rafa",
                        shot="chat-reconnecting-phone-dark")


# The page's state, event by event (run_state.js is pure: no stack needed
# beyond serving it): the notice goes with any other event, a model turn that
# starts again drops the text it had streamed, and a stored answer (what a
# reload or a snapshot draws) never has it.
STATE_JS = """
async () => {
  const s = await import("/static/web/run_state.js");
  const seen = {};
  const run = s.newRunState("r", "running");
  const apply = (seq, type, data) => s.applyEvent(run, { seq, type, data });
  apply(1, "run.started", {});
  apply(2, "llm.started", { iteration: 0 });
  apply(3, "content.delta", { text: "Half an ans" });
  apply(4, "run.reconnecting", { iteration: 0, step: "llm_turn", tool_call_id: null, reason: "lost" });
  seen.during = run.notice;
  seen.textDuring = run.rounds[0].text;
  apply(5, "llm.started", { iteration: 0 });
  seen.afterRestart = run.notice;
  seen.textAfterRestart = run.rounds[0].text;
  apply(6, "content.delta", { text: "A whole answer." });
  apply(7, "run.reconnecting", { iteration: 0, step: "tool_call", tool_call_id: "call_x", reason: "lost" });
  apply(8, "reasoning.delta", { text: "hm" });
  seen.afterReasoning = run.notice;
  apply(9, "run.reconnecting", { iteration: 0, step: "llm_turn", tool_call_id: null, reason: "lost" });
  apply(10, "run.completed", { finish_reason: "stop" });
  seen.afterEnd = run.notice;
  seen.text = run.rounds[0].text;
  seen.stored = s.stateFromMessage({ id: "m", run: "r", status: "final", content: "A whole answer." }).notice;
  return seen;
}
"""


def test_the_notice_in_the_pages_state(page: Page, log_in, browser_user):
    browser_user("rina")
    log_in(page, "rina")
    seen = page.evaluate(STATE_JS)
    assert seen == {
        "during": "Reconnecting the run…", "textDuring": "Half an ans",
        "afterRestart": "", "textAfterRestart": "",
        "afterReasoning": "", "afterEnd": "", "text": "A whole answer.", "stored": "",
    }
