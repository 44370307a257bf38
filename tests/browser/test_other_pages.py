"""The tool testing page and the settings page in a real browser."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.fakes.openai_server import FakeOpenAIServer, tool_then_answer

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_tool_testing_page(page: Page, stack, log_in, browser_user, fake_model, fake_llm: FakeOpenAIServer,
                           screenshot):
    browser_user("eve", staff=True)  # only staff tests count toward the shared status
    model = fake_model("browser-validate", tool_then_answer("calculator", {"expression": "15/100*45"}, "The tip is $6.75."))
    log_in(page, "eve")
    page.click("text=Tool testing")
    expect(page.locator(".tool-tile[data-tool=calculator]")).to_be_visible()
    page.select_option("#test-model", model)
    expect(page.locator("#validation-badge")).to_have_text("Tool calling: not tested yet")
    page.locator(".example", has_text="Calculate a 15% tip").click()
    expect(page.locator("#test-query")).to_have_value("Calculate a 15% tip on $45: what is 15/100*45?")
    page.locator(".tool-tile[data-tool=web_search] input").uncheck()
    # Trying it out is not recorded...
    page.click("#run-test")
    expect(page.locator("#result-recorded")).to_contain_text("Not recorded toward the model's validation status")
    expect(page.locator("#validation-badge")).to_have_text("Tool calling: not tested yet")
    # ...until asked to count.
    page.check("#record-test")
    page.click("#run-test")

    results = page.locator("#test-results")
    expect(results).to_be_visible()
    call = results.locator(".test-call[data-tool=calculator]")
    expect(call).to_contain_text("Iteration: 0")
    expect(call.locator(".tool-output")).to_contain_text("6.75")
    expect(page.locator("#result-answer")).to_have_text("The tip is $6.75.")
    expect(page.locator("#result-summary")).to_contain_text("success")
    expect(page.locator("#result-summary")).not_to_contain_text("Max iterations reached")
    expect(page.locator("#result-recorded")).to_have_text("Recorded toward this model's validation status.")
    expect(page.locator("#validation-badge")).to_have_text("Tool calling: validated (1/1 tests, 100%)")
    screenshot(page, "tool-testing", full_page=True)

    offered = {t["function"]["name"] for t in next(r for r in fake_llm.requests if r.get("model") == model)["tools"]}
    assert "calculator" in offered and "web_search" not in offered


def test_settings_page_manages_secrets_and_tokens(page: Page, stack, log_in, browser_user):
    browser_user("fay")
    log_in(page, "fay")
    page.click("text=Settings")

    page.fill("#secret-form input[name=name]", "tavily_api_key")
    page.fill("#secret-form input[name=value]", "tvly-very-secret-value")
    page.click("#secret-form button[type=submit]")
    expect(page.locator("tr[data-secret=tavily_api_key]")).to_contain_text("hidden")
    assert "tvly-very-secret-value" not in page.content()

    page.fill("#token-form input[name=name]", "laptop")
    page.click("#token-form button[type=submit]")
    token = page.locator("#issued-token-value").input_value()
    assert token.startswith("cf_")
    api = httpx.Client(base_url=stack.http_url, headers={"Authorization": f"Bearer {token}"})
    assert api.get("/api/conversations/").status_code == 200

    page.goto(f"{stack.http_url}/settings/")  # shown once: not on the next visit
    assert token not in page.content()
    expect(page.locator("tr[data-token=laptop]")).to_contain_text(token[:10])

    page.locator("tr[data-token=laptop] button", has_text="Rotate").click()
    rotated = page.locator("#issued-token-value").input_value()
    assert rotated != token
    assert api.get("/api/conversations/").status_code == 401
    api.headers["Authorization"] = f"Bearer {rotated}"
    assert api.get("/api/conversations/").status_code == 200

    page.goto(f"{stack.http_url}/settings/")
    page.locator("tr[data-token=laptop]:has(.good) button", has_text="Revoke").click()
    expect(page.locator(".flash")).to_contain_text("Revoked token laptop")
    assert api.get("/api/conversations/").status_code == 401

    page.locator("tr[data-secret=tavily_api_key] button", has_text="Delete").click()
    expect(page.locator("#secrets")).to_contain_text("No secrets stored.")
