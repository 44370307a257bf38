"""Code tools' cards on the chat page in a real browser (docs/web.md, "Code
tools"): a call whose arguments are one ``code`` string shows the code as a
coloured code block with Copy, and what it printed as printed; the image it
returned inline on the card, live and after a reload; a failed run's
traceback; the *cached* badge on a result served from the tool result
cache (from a stored answer, from a ``tool_output`` event, and from the
real cache serving a repeated call); and a
phone's width in the dark theme, where the code scrolls inside its card.

The browser tests' stack has no sandbox worker, so the ``python`` tool is
not offered there: the live card comes from the test tool ``run_snippet``
(tests/support/tools.py, shaped like ``python``), the ``python`` cards from
stored answers."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from playwright.sync_api import Locator, Page, expect

from chatforge.conversations.models import Conversation, Message
from chatforge.files.models import StoredFile
from tests.browser.chat_actions import last_reply, open_chat, send
from tests.browser.conftest import PHONE
from tests.browser.readability import unreadable
from tests.fakes.openai_server import Reply
from tests.support.files import stored_file
from tests.support.tools import RUN_SNIPPET_OUTPUT, cached_lookup_runs, chart_png

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CACHED_TITLE = "Served from the cache: the tool did not run again"
SNIPPET = (
    "# the numbers\n"
    "import pandas as pd\n"
    "df = pd.DataFrame({'x': [1, 3], 'y': [2, 4]})\n"
    "print('mean =', df.values.mean())\n"
    "print(df)\n"
)
# One line far wider than a phone, with nothing to break at: it must scroll
# inside the code block, not widen the card or the page.
LONG_LINE = "totals = {" + ", ".join(f"'region_{i}': {i * 1000}" for i in range(40)) + "}"
PYTHON_CODE = (
    "import matplotlib.pyplot as plt\n"
    f"{LONG_LINE}\n"
    "plt.bar(list(totals), list(totals.values()))\n"
    "plt.savefig('chart.png')\n"
    "print(\"<img src=x onerror=alert(1)> saved\")\n"
)
PRINTED = "saved chart.png\n" + "region_39 " + "=" * 200 + " 39000"
TRACEBACK = (
    "Error executing tool 'python': the code raised ZeroDivisionError. The traceback's last lines:\n"
    "Traceback (most recent call last):\n"
    '  File "/mnt/output/main.py", line 2, in <module>\n'
    "    print(1 / 0)\n"
    "ZeroDivisionError: division by zero\n"
    "Fix the code and call again."
)


def opened(card: Locator) -> Locator:
    """The card, unfolded (a finished run folds its cards)."""
    if card.get_attribute("open") is None:
        card.locator("summary").click()
    expect(card).to_have_attribute("open", "")
    return card


def files_of(reply: Locator, card: Locator) -> Locator:
    return reply.locator(f'.tool-files[data-tool-id="{card.get_attribute("data-tool-id")}"]')


def wait_until_loaded(page: Page, image: Locator, width: int) -> None:
    expect(image).to_be_visible()
    page.wait_for_function("([img, width]) => img.complete && img.naturalWidth === width",
                           arg=[image.element_handle(), width])


def test_a_code_tool_card_live_and_after_reload(page: Page, stack, browser_user, fake_model, screenshot):
    """run_snippet is called with code: its card shows the code (coloured,
    copyable), the printed text as printed, and the chart it saved inline,
    while the run is live and again from the stored answer."""
    user = browser_user("ada")
    model = fake_model("browser-code-tool", [
        Reply(text="Running it.", tool_calls=[("run_snippet", {"code": SNIPPET})]),
        Reply(text="The mean is 4.5."),
    ])
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    open_chat(page, stack, "ada")
    send(page, model, "What is the mean?")
    reply = last_reply(page)
    expect(reply).to_have_attribute("data-status", "completed")
    chart = StoredFile.objects.get(user=user, name="chart.png")
    assert chart.kind == "image" and chart.source == "tool"

    def check(reply: Locator) -> None:
        card = reply.locator(".tool-card[data-tool-name=run_snippet]")
        expect(card).to_have_attribute("data-status", "success")
        expect(card).to_have_class(re.compile(r"\bcode-call\b"))
        # Folded, the summary names the code's first statement.
        expect(card.locator(".tool-args-inline")).to_have_text("import pandas as pd")
        # The image the tool returned stays in view beside the folded card.
        image = files_of(reply, card).locator(".file-item.image img")
        wait_until_loaded(page, image, 96)
        expect(image).to_have_attribute("alt", "chart.png")
        assert files_of(reply, card).locator(".file-thumb").get_attribute("href") == f"/api/files/{chart.pk}/content/"
        opened(card)
        code = card.locator(".tool-code pre.tool-code-block code")
        expect(code).to_be_visible()
        assert code.text_content() == SNIPPET  # every line and its indentation
        expect(code).to_have_class("hljs")  # coloured (highlight.js guesses the language of a tool not named python)
        expect(card.locator(".tool-args")).to_be_hidden()  # the code is the arguments
        expect(card.locator(".tool-output-label")).to_have_text("Output")
        # As printed, columns kept, then the line naming the saved file.
        printed = card.locator(".tool-output").text_content()
        assert printed.startswith(RUN_SNIPPET_OUTPUT + "\n[Files saved to the conversation by this call: "), printed
        expect(card.locator(".tool-cached")).to_be_hidden()
        card.get_by_role("button", name="Copy the code").click()
        assert page.evaluate("navigator.clipboard.readText()") == SNIPPET

    check(reply)
    screenshot(page, "chat-code-tool")
    page.reload()
    page.wait_for_selector("body[data-chat-ready]", state="attached")
    check(last_reply(page))


def python_conversation(user) -> Conversation:
    """A stored answer with three python calls: one served from the cache
    that returned a chart, one that raised, one that ran."""
    conversation = Conversation.objects.create(user=user, title="Charts in Python")
    chart = stored_file(user, name="chart.png", data=chart_png(), kind="image", content_type="image/png",
                        conversation=conversation)
    StoredFile.objects.filter(pk=chart.pk).update(source="tool", tool_call_id="call-cached")
    shape = {"id": str(chart.pk), "name": chart.name, "content_type": chart.content_type, "kind": chart.kind,
             "size": chart.size}
    Message.objects.create(conversation=conversation, role="user", content="Chart the totals")
    rounds = [{
        "iteration": 0, "assistant_response": "Let me compute that.",
        "tool_calls": [
            {"id": "call-cached", "name": "python", "arguments": json.dumps({"code": PYTHON_CODE})},
            {"id": "call-failed", "name": "python", "arguments": json.dumps({"code": "x = 1\nprint(1 / 0)\n"})},
            {"id": "call-ran", "name": "python", "arguments": json.dumps({"code": "print([1, 2, 3])"})},
        ],
        "results": [
            {"tool_call_id": "call-cached", "name": "python", "output": PRINTED, "status": "success",
             "execution_time_ms": 3, "files": [shape], "cached": True},
            {"tool_call_id": "call-failed", "name": "python", "output": TRACEBACK, "status": "error",
             "execution_time_ms": 210},
            {"tool_call_id": "call-ran", "name": "python", "output": "[1, 2, 3]", "status": "success",
             "execution_time_ms": 180},
        ],
    }]
    Message.objects.create(conversation=conversation, role="assistant", content="Here is the chart.",
                           tool_rounds=rounds)
    return conversation


# A live run fed to the page's own modules: a tool_output event that says
# cached, and one that does not.
CACHED_EVENT_JS = """
async () => {
  const state = await import("/static/web/run_state.js");
  const render = await import("/static/web/run_render.js");
  const run = state.newRunState("live-run", "running");
  const events = [
    { seq: 1, type: "run.started", data: {} },
    { seq: 2, type: "llm.started", data: { iteration: 0 } },
    { seq: 3, type: "tool_call", data: { iteration: 0, id: "live-cached", name: "python",
                                         arguments: JSON.stringify({ code: "print(6 * 7)" }) } },
    { seq: 4, type: "tool_call", data: { iteration: 0, id: "live-ran", name: "echo",
                                         arguments: JSON.stringify({ text: "hi" }) } },
    { seq: 5, type: "tool_output", data: { tool_call_id: "live-cached", status: "success", output: "42",
                                           execution_time_ms: 2, cached: true } },
    { seq: 6, type: "tool_output", data: { tool_call_id: "live-ran", status: "success", output: "hi",
                                           execution_time_ms: 1 } },
  ];
  for (const event of events) state.applyEvent(run, event);
  const article = render.createRunArticle("live-run");
  article.id = "live-article";
  document.getElementById("history").append(article);
  render.renderRun(article, run);
}
"""


def test_python_calls_of_a_stored_answer_cached_and_failed(page: Page, stack, browser_user):
    user = browser_user("bo")
    conversation = python_conversation(user)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    open_chat(page, stack, "bo")
    page.goto(f"{stack.http_url}/c/{conversation.pk}/")
    page.wait_for_selector("body[data-chat-ready]", state="attached")
    reply = last_reply(page)

    cached = reply.locator('.tool-card[data-tool-id="call-cached"]')
    badge = cached.locator(".tool-cached")
    expect(badge).to_be_visible()  # in the summary: seen while the card is folded
    expect(badge).to_have_text("cached")
    expect(badge).to_have_attribute("title", CACHED_TITLE)
    image = files_of(reply, cached).locator(".file-item.image img")
    wait_until_loaded(page, image, 96)
    opened(cached)
    code = cached.locator(".tool-code-block code")
    assert code.text_content() == PYTHON_CODE
    # The model's code is text: its markup makes no element and runs nothing.
    assert code.locator("img").count() == 0 and cached.locator(".tool-body img").count() == 0
    assert cached.locator(".tool-output").text_content() == PRINTED

    failed = opened(reply.locator('.tool-card[data-tool-id="call-failed"]'))
    expect(failed).to_have_attribute("data-status", "error")
    expect(failed.locator(".tool-cached")).to_be_hidden()
    expect(failed.locator(".tool-output-label")).to_have_text("Error")
    output = failed.locator(".tool-output")
    expect(output).to_have_class("tool-output mono failed")
    assert output.text_content() == TRACEBACK
    # The traceback wraps: its whole last line is in view, nothing to scroll to.
    assert output.evaluate("(pre) => pre.scrollWidth <= pre.clientWidth")

    ran = opened(reply.locator('.tool-card[data-tool-id="call-ran"]'))
    expect(ran.locator(".tool-cached")).to_be_hidden()
    expect(ran.locator(".tool-output")).to_have_text("[1, 2, 3]")  # printed, not re-indented as JSON

    assert unreadable({
        "cached badge": badge,
        "code": code,
        "keyword": code.locator(".hljs-keyword").first,
        "printed": cached.locator(".tool-output"),
        "traceback": output,
        "copy": cached.locator(".copy-code"),
    }) == {}

    # Live: the tool_output event's ``cached`` is what shows the badge.
    page.evaluate(CACHED_EVENT_JS)
    live = page.locator("#live-article")
    expect(live.locator('.tool-card[data-tool-id="live-cached"] .tool-cached')).to_be_visible()
    expect(live.locator('.tool-card[data-tool-id="live-cached"] .tool-code-block code')).to_have_text("print(6 * 7)")
    expect(live.locator('.tool-card[data-tool-id="live-ran"] .tool-cached')).to_be_hidden()
    expect(live.locator('.tool-card[data-tool-id="live-ran"] .tool-args')).to_be_visible()  # not a code call
    assert dialogs == []


def test_the_cached_badge_from_the_real_cache(page: Page, stack, browser_user, fake_model):
    """The same call twice, in two rounds of one run: the second is served
    from the tool result cache (the test tool cached_lookup, cached per user,
    counts its runs) and its card says so, live and after a reload."""
    browser_user("dee")
    args = {"word": "kiwi", "nonce": uuid.uuid4().hex}  # no earlier test's cache entry
    model = fake_model("browser-cached", [
        Reply(text="Looking it up.", tool_calls=[("cached_lookup", args)]),
        Reply(text="Once more.", tool_calls=[("cached_lookup", args)]),
        Reply(text="Both said kiwi."),
    ])
    open_chat(page, stack, "dee")
    send(page, model, "Look up kiwi twice")
    expect(last_reply(page)).to_have_attribute("data-status", "completed")
    assert cached_lookup_runs(**args) == 1

    def check(reply: Locator) -> None:
        cards = reply.locator(".tool-card[data-tool-name=cached_lookup]")
        expect(cards).to_have_count(2)
        expect(cards.nth(0).locator(".tool-cached")).to_be_hidden()
        expect(cards.nth(1).locator(".tool-cached")).to_be_visible()
        expect(cards.nth(1).locator(".tool-cached")).to_have_attribute("title", CACHED_TITLE)

    check(last_reply(page))
    page.reload()
    page.wait_for_selector("body[data-chat-ready]", state="attached")
    check(last_reply(page))


# Elements a reader would see beyond the screen's right edge: past it, and
# not clipped by a scrolling box that itself ends inside the screen (a code
# line scrolled inside its block is not outside the page).
_VISIBLY_OUT_JS = """
() => {
  const width = document.documentElement.clientWidth;
  const clippedInside = (el) => {
    for (let node = el.parentElement; node && node !== document.body; node = node.parentElement) {
      const style = getComputedStyle(node);
      if (style.overflowX !== "visible" && node.getBoundingClientRect().right <= width + 0.5) return true;
    }
    return false;
  };
  const out = [];
  for (const el of document.querySelectorAll("body *")) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 && box.height === 0) continue;
    if (box.right > width + 0.5 && !clippedInside(el)) {
      out.push(`${el.tagName.toLowerCase()}.${[...el.classList].join(".")} right=${Math.round(box.right)}`);
    }
  }
  return out;
}
"""


def test_code_cards_on_a_phone_in_the_dark(phone_page: Page, stack, browser_user, screenshot):
    page = phone_page
    user = browser_user("cy")
    conversation = python_conversation(user)
    open_chat(page, stack, "cy")
    page.goto(f"{stack.http_url}/c/{conversation.pk}/")
    page.wait_for_selector("body[data-chat-ready]", state="attached")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    reply = last_reply(page)
    cards = {id_: opened(reply.locator(f'.tool-card[data-tool-id="{id_}"]'))
             for id_ in ("call-cached", "call-failed", "call-ran")}
    cached = cards["call-cached"]

    # The page does not scroll sideways; the long line scrolls inside its block.
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert page.locator("#history").evaluate("(el) => el.scrollWidth <= el.clientWidth")
    assert page.evaluate(_VISIBLY_OUT_JS) == []
    block = cached.locator(".tool-code-block")
    card_box, block_box = cached.bounding_box(), block.bounding_box()
    assert card_box["x"] >= 0 and card_box["x"] + card_box["width"] <= PHONE["width"]
    assert block_box["x"] + block_box["width"] <= card_box["x"] + card_box["width"]
    assert block.evaluate("(pre) => pre.scrollWidth > pre.clientWidth")  # LONG_LINE is there to scroll to
    printed = cached.locator(".tool-output")
    assert printed.evaluate("(pre) => pre.scrollWidth > pre.clientWidth")  # printed lines are kept too
    expect(cached.locator(".tool-cached")).to_be_visible()

    code = block.locator("code")
    assert unreadable({
        "code": code,
        "keyword": code.locator(".hljs-keyword").first,
        "string": code.locator(".hljs-string").first,
        "code label": cached.locator(".tool-code .label"),
        "copy": cached.locator(".copy-code"),
        "printed": printed,
        "cached badge": cached.locator(".tool-cached"),
        "traceback": cards["call-failed"].locator(".tool-output"),
        "error label": cards["call-failed"].locator(".tool-output-label"),
        "summary": cards["call-ran"].locator(".tool-args-inline"),
    }) == {}
    cached.evaluate("(card) => card.scrollIntoView({ block: 'start' })")
    screenshot(page, "chat-code-tool-phone-dark")
