"""axe-core audits (WCAG 2.0/2.1 A and AA, tests/browser/accessibility.py)
of the pages people use: the chat page empty and with a conversation
holding a tool call and an answer, on a desktop in the light theme and on a
phone in the dark one; the settings, tool testing and login pages."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.accessibility import assert_accessible
from tests.browser.chat_actions import ask, open_chat
from tests.fakes.openai_server import tool_then_answer

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ANSWER = r"""The tip is **$6.75**, from $\frac{15}{100} \times 45$:

| share | amount |
|---|---:|
| 15% | 6.75 |

```python
print(15 / 100 * 45)
```
"""


def _chat_audits(page: Page, stack, browser_user, fake_model, username: str, theme: str) -> None:
    browser_user(username)
    model = fake_model(f"browser-a11y-{username}",
                       tool_then_answer("calculator", {"expression": "15/100*45"}, ANSWER))
    open_chat(page, stack, username)
    assert_accessible(page, name=f"the empty chat page ({theme})")
    reply = ask(page, model, "What is a 15% tip on $45?")
    expect(reply.locator(".tool-card")).to_have_count(1)
    expect(reply.locator(".round-text .katex")).to_have_count(1)
    assert_accessible(page, name=f"the chat page with a tool call and an answer ({theme})")
    page.reload()
    page.wait_for_selector("body[data-chat-ready]", state="attached")
    expect(page.locator("article.assistant .tool-card")).to_have_count(1)
    assert_accessible(page, name=f"the chat page's stored conversation after a reload ({theme})")


def test_chat_page_desktop_light(page: Page, stack, browser_user, fake_model):
    _chat_audits(page, stack, browser_user, fake_model, "ally", "desktop, light")


def test_chat_page_phone_dark(phone_page: Page, stack, browser_user, fake_model):
    _chat_audits(phone_page, stack, browser_user, fake_model, "phoebe", "phone, dark")


def test_settings_tool_testing_and_login_pages(page: Page, stack, log_in, browser_user):
    page.goto(f"{stack.http_url}/accounts/login/")
    expect(page.locator("#id_username")).to_be_visible()
    assert_accessible(page, name="the login page")
    page.fill("#id_username", "nobody")
    page.fill("#id_password", "wrong-password")
    page.click("button[type=submit]")
    expect(page.locator("#id_username")).to_be_visible()
    assert_accessible(page, name="the login page after a failed sign-in")

    browser_user("auditor")
    log_in(page, "auditor")
    page.goto(f"{stack.http_url}/settings/")
    expect(page.locator("#secret-form")).to_be_visible()
    assert_accessible(page, name="the settings page")
    page.goto(f"{stack.http_url}/tools/testing/")
    assert_accessible(page, name="the tool testing page")


def test_pages_on_a_phone_in_the_dark(phone_page: Page, stack, log_in, browser_user):
    browser_user("night")
    log_in(phone_page, "night")
    phone_page.goto(f"{stack.http_url}/settings/")
    assert_accessible(phone_page, name="the settings page (phone, dark)")
    phone_page.goto(f"{stack.http_url}/tools/testing/")
    assert_accessible(phone_page, name="the tool testing page (phone, dark)")
