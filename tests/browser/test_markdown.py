"""Assistant replies as Markdown in a real browser: what renders (headings,
lists, tables, links, highlighted code with a copy button), what never runs
(hostile Markdown and HTML from a model), copying, and a history that
follows a streaming answer unless the reader scrolled up."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.chat_actions import last_reply, send
from tests.fakes.openai_server import Reply

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

RICH = """## Plan

Some **bold** and *emphasis*, and a [link](https://example.com/docs).

- first
- second

| name | count |
|---|---:|
| apples | 3 |

```python
def answer():
    return 42
```
"""

HOSTILE = """<script>alert('script')</script>
<img src=x onerror="alert('img')">
<iframe src="https://example.com"></iframe>
[click me](javascript:alert('link'))
<a href="javascript:alert('raw')">raw link</a>
[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)
"""


def test_markdown_renders_with_highlighted_code_and_copy_buttons(page: Page, log_in, browser_user, fake_model):
    browser_user("mae")
    model = fake_model("browser-markdown", [Reply(text=RICH)])
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    log_in(page, "mae")
    send(page, model, "Show me markdown")

    reply = last_reply(page)
    expect(reply).to_have_attribute("data-status", "completed")
    text = reply.locator(".round-text")
    expect(text.locator("h2")).to_have_text("Plan")
    expect(text.locator("strong")).to_have_text("bold")
    expect(text.locator("em")).to_have_text("emphasis")
    expect(text.locator("ul > li")).to_have_count(2)
    expect(text.locator("table td").first).to_have_text("apples")
    link = text.locator("a")
    expect(link).to_have_attribute("href", "https://example.com/docs")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    code = text.locator("pre code")
    expect(code).to_have_class("hljs language-python")
    expect(code.locator(".hljs-keyword").first).to_have_text("def")
    assert text.locator("[style]").count() == 0  # table alignment, dropped: the CSP allows no inline style

    text.locator("pre .copy-button").click()
    assert page.evaluate("navigator.clipboard.readText()") == "def answer():\n    return 42\n"
    reply.locator(".msg-header .copy-message").click()
    assert page.evaluate("navigator.clipboard.readText()") == RICH  # the Markdown source


def test_hostile_markdown_runs_nothing(page: Page, log_in, browser_user, fake_model):
    browser_user("mal")
    model = fake_model("browser-hostile", [Reply(text=HOSTILE)])
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page, "mal")
    send(page, model, "Be evil")

    reply = last_reply(page)
    expect(reply).to_have_attribute("data-status", "completed")
    text = reply.locator(".round-text")
    expect(text).to_contain_text("<script>alert('script')</script>")  # shown as text, not run
    assert text.locator("script, iframe, img").count() == 0
    for anchor in text.locator("a").all():
        href = anchor.get_attribute("href") or ""
        assert not href.lower().startswith(("javascript:", "data:")), href
    handlers = page.evaluate(
        """() => [...document.querySelectorAll('.round-text *')]
                .flatMap((el) => [...el.attributes].map((a) => a.name))
                .filter((name) => name.startsWith('on'))""")
    assert handlers == []
    page.wait_for_timeout(300)  # an onerror would fire at once
    assert dialogs == []


def test_the_history_follows_a_streaming_answer_until_the_reader_scrolls_up(page: Page, log_in, browser_user,
                                                                             fake_model):
    browser_user("flo")
    long_answer = "\n\n".join(f"Line {i}." for i in range(150))
    model = fake_model("browser-follow", [Reply(text=long_answer, chunk_delay_s=0.03)])
    log_in(page, "flo")
    send(page, model, "Talk a lot")

    history = page.locator("#history")
    jump = page.locator("#jump-to-latest")
    reply = last_reply(page)
    expect(reply.locator(".round-text")).to_contain_text("Line 40.", timeout=20_000)
    at_end = "(el) => el.scrollHeight - el.scrollTop - el.clientHeight <= 40"
    assert history.evaluate(at_end)  # followed so far
    expect(jump).to_be_hidden()

    history.evaluate("(el) => { el.scrollTop = 0; }")  # the reader scrolls up to read
    expect(reply.locator(".round-text")).to_contain_text("Line 80.", timeout=20_000)
    expect(jump).to_be_visible()
    assert history.evaluate("(el) => el.scrollTop") == 0  # left where the reader put it

    jump.click()
    expect(jump).to_be_hidden()
    assert history.evaluate(at_end)
    expect(reply).to_have_attribute("data-status", "completed", timeout=20_000)
    assert history.evaluate(at_end)  # following again to the end
