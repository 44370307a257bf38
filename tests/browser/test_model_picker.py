"""The chat page's model picker in a real browser: models grouped by
provider, one the person has no key for disabled with the reason, a hint
under the picker linking to Settings, and a picked model is the one the
answer comes from."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from chatforge.conversations.models import Run
from chatforge.llm.models import LanguageModel, Provider
from tests.browser.chat_actions import ask, open_chat
from tests.fakes.openai_server import Reply

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def locked_model() -> str:
    """A model at Anthropic's public endpoint, with no key on its provider
    and none in the stack's environment."""
    provider = Provider.objects.create(name="anthropic-main", kind="anthropic")
    LanguageModel.objects.create(name="anthropic/claude-locked", provider=provider)
    return "anthropic/claude-locked"


def test_an_unusable_model_is_disabled_with_its_reason_and_a_usable_one_answers(
        page: Page, stack, browser_user, fake_model, locked_model, screenshot):
    browser_user("picker")
    model = fake_model("browser-picker", [Reply(text="Answered by the picked model.")])
    open_chat(page, stack, "picker")

    select = page.locator("#model-select")
    expect(select.locator("option").first).to_have_text("Default: demo")
    expect(select.locator("optgroup")).to_have_count(3)  # built-in, anthropic-main, fake-openai
    expect(select.locator("optgroup[label='anthropic-main'] option")).to_have_text(
        f"{locked_model} (needs an API key)")
    locked = select.locator(f"option[value='{locked_model}']")
    expect(locked).to_be_disabled()
    expect(locked).to_have_attribute("title", "No API key for model 'anthropic/claude-locked' of provider "
                                              "'anthropic-main': add your own key as 'anthropic_api_key' on the "
                                              "Settings page (Your API keys and secrets), or ask an admin to set "
                                              "the provider's key.")
    expect(select.locator(f"optgroup[label='fake-openai'] option[value='{model}']")).to_be_enabled()

    hint = page.locator("#model-key-hint")
    expect(hint).to_have_text("No API key for anthropic-main: add yours in Settings.")
    expect(select).to_have_attribute("aria-describedby", "model-key-hint")
    screenshot(page, "chat-model-picker")
    hint.get_by_role("link", name="Settings").click()
    expect(page).to_have_url(f"{stack.http_url}/settings/#secrets")

    # With their own key saved on the Settings page, the model is theirs to pick.
    page.fill("#id_name", "anthropic_api_key")
    page.fill("#id_value", "sk-ant-own-key")
    page.click("#secret-form button[type=submit]")
    expect(page.locator("tr[data-secret='anthropic_api_key']")).to_be_visible()
    page.goto(f"{stack.http_url}/")
    page.wait_for_selector("body[data-chat-ready]", state="attached")
    expect(page.locator(f"#model-select option[value='{locked_model}']")).to_be_enabled()
    expect(page.locator(f"#model-select option[value='{locked_model}']")).to_have_text(locked_model)
    expect(page.locator("#model-key-hint")).to_have_count(0)

    reply = ask(page, model, "Which model are you?")
    expect(reply.locator(".round-text")).to_have_text("Answered by the picked model.")
    assert Run.objects.get().model == model
