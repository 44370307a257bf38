"""Versions on the chat page in a real browser: an edited question and a
regenerated answer become versions (‹ n / m ›) beside the earlier ones,
switching between them redraws the branch and survives a reload, a new
message continues the chosen version; and every answer says which model
(and assistant profile) gave it, live and after a reload."""

from __future__ import annotations

import itertools

import pytest
from playwright.sync_api import Locator, Page, expect

from chatforge.catalog.models import Assistant
from chatforge.conversations.models import Conversation, Message, Run
from tests.browser.chat_actions import ask, last_reply, send
from tests.fakes.openai_server import Reply, last_user_text
from tests.support.stack import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SLOW_WORDS = " ".join(f"w{i}" for i in range(60))
# Long enough that a reload usually lands while it still streams (the
# checks hold either way: the page shows the same before and after the end).
LONG_WORDS = " ".join(f"w{i}" for i in range(200))


def echo_model(fake_model, name: str) -> str:
    """Answers every question with "Answer to: <question>"."""
    return fake_model(name, lambda body: Reply(text=f"Answer to: {last_user_text(body)}"))


def runs_ended(user) -> None:
    """Wait until the user's runs are stored as ended. The page may show an
    answer completed (its run.completed event) a moment before the run's
    row commits, and an edit or a regeneration sent in that moment is
    refused as "a run in progress" (the page then shows that message)."""
    wait_for(lambda: not Run.objects.filter(user=user).exclude(status__in=Run.TERMINAL).exists(),
             timeout=30, what="the runs to be stored as ended")


def versions(article: Locator) -> Locator:
    return article.locator(".msg-header .versions")


def user_texts(page: Page) -> list[str]:
    return page.locator("article.user .round-text").all_text_contents()


def api_messages(page: Page, stack, conversation: Conversation, *, tree: bool = False) -> list[dict]:
    """GET …/messages/ as the signed-in person (the browser's own session)."""
    query = "?tree=1&limit=200" if tree else "?limit=200"
    response = page.request.get(f"{stack.http_url}/api/conversations/{conversation.pk}/messages/{query}")
    assert response.ok, response.text()
    return response.json()["results"]


def test_edit_makes_a_second_version_and_the_choice_survives_a_reload(page: Page, stack, log_in, browser_user,
                                                                      fake_model, screenshot):
    user = browser_user("eve")
    model = echo_model(fake_model, "browser-versions-edit")
    log_in(page, "eve")
    ask(page, model, "first question")
    ask(page, model, "second question")
    expect(versions(page.locator("article.user").first)).to_have_count(0)  # one version: no control
    runs_ended(user)

    # Edit the first question: a new version beside it, its own answer under it.
    page.locator("article.user").first.get_by_role("button", name="Edit").click()
    page.locator(".edit-box textarea").fill("first question, edited")
    page.locator(".edit-box .save-edit").click()
    edited = page.locator("article.user").first
    expect(page.locator("article.user .round-text")).to_have_text(["first question, edited"])
    expect(versions(edited).locator(".version-count")).to_have_text("2 / 2")
    expect(last_reply(page)).to_have_attribute("data-status", "completed")
    expect(last_reply(page).locator(".round-text")).to_have_text("Answer to: first question, edited")
    expect(edited.get_by_role("button", name="Next version")).to_be_disabled()
    conversation = Conversation.objects.get(user=user)
    assert conversation.messages.count() == 6  # nothing was deleted

    # ‹ goes back to version 1, with what followed it.
    runs_ended(user)
    edited.get_by_role("button", name="Previous version").click()
    expect(page.locator("article.user .round-text")).to_have_text(["first question", "second question"])
    expect(page.locator("article.assistant .round-text")).to_have_text(
        ["Answer to: first question", "Answer to: second question"])
    first = page.locator("article.user").first
    expect(versions(first).locator(".version-count")).to_have_text("1 / 2")
    expect(first.get_by_role("button", name="Previous version")).to_be_disabled()
    # The focus stays on the control (the button pressed is disabled now: its neighbour).
    expect(first.get_by_role("button", name="Next version")).to_be_focused()
    screenshot(page, "chat-versions")

    # The choice is the server's: a reload shows version 1 again.
    page.reload()
    page.wait_for_selector("body[data-chat-ready]", state="attached")
    expect(page.locator("article.user .round-text")).to_have_text(["first question", "second question"])
    expect(versions(page.locator("article.user").first).locator(".version-count")).to_have_text("1 / 2")

    # The keyboard reaches it: Enter on › shows version 2 again.
    page.locator("article.user").first.get_by_role("button", name="Next version").focus()
    page.keyboard.press("Enter")
    expect(page.locator("article.user .round-text")).to_have_text(["first question, edited"])
    expect(versions(page.locator("article.user").first).locator(".version-count")).to_have_text("2 / 2")


def test_regenerate_makes_a_second_answer_and_a_new_message_follows_the_chosen_one(page: Page, stack, log_in,
                                                                                   browser_user, fake_model):
    user = browser_user("reg")
    calls = itertools.count(1)

    def script(body):
        n = next(calls)
        if last_user_text(body) != "a question":
            return Reply(text=f"Answer to: {last_user_text(body)}")
        # The second answer streams slowly: the page is seen while it comes in.
        return Reply(text=f"Answer {n}. {LONG_WORDS if n == 2 else ''}", chunk_delay_s=0.05 if n == 2 else 0)

    model = fake_model("browser-versions-regenerate", script)
    log_in(page, "reg")
    first_answer = ask(page, model, "a question")
    expect(first_answer.locator(".round-text")).to_contain_text("Answer 1.")
    expect(versions(first_answer)).to_have_count(0)
    first_id = Message.objects.get(conversation__user=user, role="assistant").pk
    runs_ended(user)

    last_reply(page).get_by_role("button", name="Regenerate").click()
    streaming = last_reply(page)
    expect(streaming.locator(".round-text")).to_contain_text("w3 ")
    expect(streaming).to_have_attribute("data-status", "running")
    expect(versions(streaming).locator(".version-count")).to_have_text("2 / 2")
    # No switching while the run is active.
    expect(streaming.get_by_role("button", name="Previous version")).to_be_disabled()
    expect(page.locator("article.assistant")).to_have_count(1)
    # A reload mid-stream shows the same: the earlier answer is version 1, not on screen.
    page.reload()
    page.wait_for_selector("body[data-chat-ready]", state="attached")
    streaming = last_reply(page)
    expect(versions(streaming).locator(".version-count")).to_have_text("2 / 2")
    expect(page.locator("article.assistant")).to_have_count(1)
    expect(streaming).to_have_attribute("data-status", "completed")
    expect(versions(streaming).locator(".version-count")).to_have_text("2 / 2")
    expect(streaming.locator(".round-text")).to_contain_text("Answer 2.")

    # Switch back to the first answer, and continue from it.
    runs_ended(user)
    streaming.get_by_role("button", name="Previous version").click()
    answer = page.locator("article.assistant").last
    expect(answer.locator(".round-text")).to_have_text("Answer 1.")
    expect(versions(answer).locator(".version-count")).to_have_text("1 / 2")
    expect(answer).to_have_attribute("data-message-id", str(first_id))
    ask(page, model, "follow-up")
    expect(page.locator("article.user .round-text")).to_have_text(["a question", "follow-up"])
    conversation = Conversation.objects.get(user=user)
    follow_up = next(m for m in api_messages(page, stack, conversation) if m["content"] == "follow-up")
    assert follow_up["parent_id"] == str(first_id)

    # ›: the second answer's branch has no follow-up.
    runs_ended(user)
    page.locator("article.assistant").first.get_by_role("button", name="Next version").click()
    expect(page.locator("article.user .round-text")).to_have_text(["a question"])
    expect(last_reply(page).locator(".round-text")).to_contain_text("Answer 2.")
    assert len(api_messages(page, stack, conversation, tree=True)) == 5


def test_answers_say_their_model_and_assistant_live_and_after_a_reload(page: Page, log_in, browser_user,
                                                                       fake_model):
    browser_user("mo")
    model = fake_model("browser-model-label", lambda body: Reply(text=f"Slowly: {SLOW_WORDS}", chunk_delay_s=0.05))
    tutor_model = echo_model(fake_model, "browser-tutor-model")
    Assistant.objects.create(name="Tutor", system_prompt="You explain things simply.", model=tutor_model)
    log_in(page, "mo")
    send(page, model, "Which model are you?")
    live = last_reply(page)
    expect(live.locator(".round-text")).to_contain_text("w3 ")
    expect(live).to_have_attribute("data-status", "running")
    expect(live.locator(".answer-model")).to_have_text(model)
    expect(live.locator(".answer-assistant")).to_be_hidden()
    expect(live).to_have_attribute("data-status", "completed")

    # An assistant profile with its own model: the page asks for neither
    # model nor tools, the run says which model the profile chose.
    page.select_option("#model-select", "")
    page.select_option("#assistant-select", "Tutor")
    page.fill("#message-input", "Explain gravity")
    page.keyboard.press("Enter")
    tutored = page.locator("article.assistant").nth(1)
    expect(tutored.locator(".answer-assistant")).to_have_text("Tutor")
    expect(tutored.locator(".answer-model")).to_have_text(tutor_model)
    expect(tutored).to_have_attribute("data-status", "completed")

    page.reload()
    page.wait_for_selector("body[data-chat-ready]", state="attached")
    answers = page.locator("article.assistant")
    expect(answers.locator(".answer-model")).to_have_text([model, tutor_model])
    expect(answers.nth(0).locator(".answer-assistant")).to_be_hidden()
    expect(answers.nth(1).locator(".answer-assistant")).to_have_text("Tutor")


def test_versions_on_a_phone_in_the_dark(phone_page: Page, log_in, browser_user, fake_model, screenshot):
    user = browser_user("pho")
    model = echo_model(fake_model, "browser-versions-phone")
    log_in(phone_page, "pho")
    ask(phone_page, model, "How far is the moon?")
    runs_ended(user)
    phone_page.locator("article.user").first.get_by_role("button", name="Edit").click()
    phone_page.locator(".edit-box textarea").fill("How far is the moon, in km?")
    phone_page.locator(".edit-box .save-edit").click()
    question, answer = phone_page.locator("article.user").first, last_reply(phone_page)
    expect(versions(question).locator(".version-count")).to_have_text("2 / 2")
    expect(answer.locator(".round-text")).to_have_text("Answer to: How far is the moon, in km?")
    runs_ended(user)
    answer.get_by_role("button", name="Regenerate").click()
    expect(versions(answer).locator(".version-count")).to_have_text("2 / 2")
    expect(answer).to_have_attribute("data-status", "completed")
    expect(answer.locator(".answer-model")).to_have_text(model)
    # Nothing is wider than the phone.
    width = phone_page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width} px wide on a 390 px phone"
    for article in (question, answer):
        box = versions(article).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    # Each version button is big enough to hit with a finger.
    button = versions(answer).get_by_role("button", name="Previous version").bounding_box()
    assert button is not None and button["width"] >= 32 and button["height"] >= 28
    screenshot(phone_page, "chat-versions-phone-dark")
