"""TeX formulas in assistant answers, typeset by KaTeX in a real browser:
each delimiter, what must stay text (code, prices, unclosed formulas while
an answer streams in), what a hostile formula cannot do (links, classes,
raw HTML: KaTeX runs untrusted), bad TeX, the dark theme, and the time one
render of a long answer with many formulas takes.

The page's Content-Security-Policy forbids inline style attributes, and
KaTeX styles every formula: the page fixtures fail any test whose page
reports a policy violation, so each test here also checks that typesetting
keeps to the policy."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.chat_actions import ask, last_reply, open_chat, send
from tests.fakes.openai_server import Reply

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

DELIMITERS = r"""Inline with dollars: $a^2 + b^2 = c^2$ and with parentheses: \(\sqrt{x}\).

$$
\int_0^1 x^2 \, dx = \frac{1}{3}
$$

\[
\sum_{i=1}^{n} i = \frac{n(n+1)}{2}
\]

A display formula inside a paragraph: $$e^{i\pi} + 1 = 0$$ and on.

Prices stay prices: it costs $5 and $10, or $ 20 $ in cash.

Code stays code: `$x^2$` and

```
$$ \frac{1}{2} $$ and \(y\)
```

Escaped: \$3 for one.

A price, then a formula: **$6.75**, from $\frac{15}{100} \times 45$.
"""


def _math_answer(page: Page, stack, browser_user, fake_model, username: str, text: str):
    browser_user(username)
    model = fake_model(f"browser-math-{username}", [Reply(text=text)])
    open_chat(page, stack, username)
    return ask(page, model, "Some maths, please").locator(".round-text")


def test_each_delimiter_renders_and_code_and_prices_stay_text(page: Page, stack, browser_user, fake_model,
                                                              screenshot):
    text = _math_answer(page, stack, browser_user, fake_model, "euler", DELIMITERS)

    paragraphs = text.locator("p")
    first = paragraphs.nth(0)
    expect(first.locator(".katex")).to_have_count(2)  # $…$ and \(…\)
    expect(first.locator(".katex-display")).to_have_count(0)
    expect(first.locator(".katex annotation").first).to_have_text("a^2 + b^2 = c^2")  # the MathML's source
    expect(first.locator(".katex annotation").nth(1)).to_have_text(r"\sqrt{x}")

    blocks = text.locator("div.math-tex")  # $$ and \[ on lines of their own
    expect(blocks).to_have_count(2)
    expect(blocks.nth(0).locator(".katex-display annotation")).to_have_text(r"\int_0^1 x^2 \, dx = \frac{1}{3}")
    expect(blocks.nth(1).locator(".katex-display annotation")).to_have_text(r"\sum_{i=1}^{n} i = \frac{n(n+1)}{2}")
    expect(paragraphs.nth(1).locator(".katex-display")).to_have_count(1)  # $$…$$ inside a paragraph

    prices = paragraphs.nth(2)
    expect(prices).to_have_text("Prices stay prices: it costs $5 and $10, or $ 20 $ in cash.")
    expect(prices.locator(".math-tex")).to_have_count(0)

    expect(text.locator("p code")).to_have_text("$x^2$")
    expect(text.locator("pre code")).to_contain_text(r"$$ \frac{1}{2} $$ and \(y\)")
    assert text.locator("code .math-tex, pre .math-tex").count() == 0
    expect(paragraphs.nth(4)).to_have_text("Escaped: $3 for one.")
    price_then_formula = paragraphs.nth(5)
    expect(price_then_formula.locator("strong")).to_have_text("$6.75")
    expect(price_then_formula.locator(".katex annotation")).to_have_text(r"\frac{15}{100} \times 45")

    assert text.locator(".katex-error").count() == 0
    # KaTeX's fonts came from our origin, and its styles reached the page.
    assert page.evaluate("document.fonts.check('16px KaTeX_Main')")
    frac_height = text.locator(".katex-display .vlist").first.evaluate("(el) => el.style.height")
    assert frac_height.endswith("em"), frac_height
    screenshot(page, "chat-math")


HOSTILE = r"""Links: $\href{javascript:alert(1)}{click}$ and $\url{javascript:alert(2)}$.

Classes and HTML: $\htmlClass{evil}{x}$ $\htmlId{evil}{y}$ $\htmlStyle{color:red}{z}$ $\htmlData{foo=bar}{w}$.

An image: $\includegraphics[height=1em]{https://example.com/x.png}$.

Raw HTML in TeX: $\text{<img src=x onerror=alert(3)>}$ and </span><script>alert(4)</script>.

Bad TeX: $\frac{1}{$ and $\begin{matrix} a$ and $\undefinedmacro{x}$.

Too big: $\rule{1000em}{1000em}$ and a bomb: $\def\a{\a\a}\a$.

Still fine afterwards: $x+1$.
"""


def test_hostile_and_bad_tex_makes_no_links_no_html_and_breaks_nothing(page: Page, stack, browser_user,
                                                                          fake_model):
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    text = _math_answer(page, stack, browser_user, fake_model, "mallory", HOSTILE)

    assert text.locator("a").count() == 0  # \href and \url refused (trust: false)
    assert text.locator("img, script, iframe").count() == 0
    assert text.locator(".evil, #evil, [data-foo], [style*='red']").count() == 0
    handlers = text.evaluate(
        "(el) => [...el.querySelectorAll('*')].flatMap((n) => [...n.attributes].map((a) => a.name))"
        ".filter((name) => name.startsWith('on'))")
    assert handlers == []
    # Untrusted commands are typeset as their own source in the error
    # colour (KaTeX's way with trust: false); the text inside a formula is
    # text, not markup.
    untrusted = text.locator("p").nth(0)
    expect(untrusted.locator(".katex")).to_have_count(2)
    expect(untrusted).to_contain_text(r"\href")
    expect(text).to_contain_text("<img src=x onerror=alert(3)>")
    expect(text).to_contain_text("</span><script>alert(4)</script>")
    # TeX that does not parse is its source, marked and titled with the
    # reason, each formula in its own place.
    bad = text.locator("p").nth(4).locator(".katex-error")
    expect(bad).to_have_count(3)
    expect(bad.nth(0)).to_have_text(r"\frac{1}{")
    expect(bad.nth(0)).to_have_attribute("title", re.compile("Unexpected end of input"))
    expect(bad.nth(2)).to_have_attribute("title", re.compile(r"Undefined control sequence: \\undefinedmacro"))
    too_big = text.locator("p").nth(5)
    expect(too_big.locator(".katex")).to_have_count(1)  # the \rule, held to maxSize
    expect(too_big.locator(".katex-error")).to_have_attribute("title", re.compile("Too many expansions"))
    rule = too_big.locator(".katex .rule").evaluate("(el) => el.getBoundingClientRect().width")
    assert rule <= 20 * 30, rule  # 20 em at most, not 1000 em
    last = text.locator("p").last
    expect(last.locator(".katex")).to_have_count(1)
    expect(last.locator(".katex-error")).to_have_count(0)
    page.wait_for_timeout(300)  # an onerror would fire at once
    assert dialogs == []


STREAMED = "Energy: $E = m c ^ 2 + a + b + c + d + e + f + g + h$ done."


def test_a_formula_streams_in_as_text_and_renders_once_closed(page: Page, stack, browser_user, fake_model):
    """The fake LLM streams the answer word by word and stops for a while in
    the middle of the formula (``stall_s``). A MutationObserver in the page
    notes every state of the answer's text, so the test needs no timing of
    its own: every state either shows the formula's source as plain text
    or the typeset formula, never an error, and the half-written one is
    among them."""
    browser_user("ada")
    model = fake_model("browser-math-stream", [Reply(text=STREAMED, stall_s=2.0)])
    open_chat(page, stack, "ada")
    page.evaluate("""() => {
        window.mathStates = [];
        const history = document.getElementById("history");
        new MutationObserver(() => {
            const text = [...document.querySelectorAll("article.assistant .round-text")].pop();
            if (!text) return;
            window.mathStates.push({
                text: text.textContent,
                katex: text.querySelectorAll(".katex").length,
                errors: text.querySelectorAll(".katex-error").length,
            });
        }).observe(history, { childList: true, subtree: true, characterData: true });
    }""")
    send(page, model, "Tell me about energy")
    reply = last_reply(page)
    expect(reply).to_have_attribute("data-status", "completed")
    expect(reply.locator(".round-text .katex")).to_have_count(1)

    states = page.evaluate("window.mathStates")
    assert all(state["errors"] == 0 for state in states), states
    half_written = [s for s in states if "$E = m" in s["text"] and not s["text"].endswith("done.")]
    assert half_written, states
    assert all(state["katex"] == 0 for state in half_written)
    assert states[-1]["katex"] == 1


def test_every_prefix_of_an_answer_renders_without_errors(page: Page, stack, browser_user, fake_model):
    """The same in the page itself, token by token: renderMarkdown (the
    function the streaming answer goes through) on each prefix of an answer
    with each kind of formula. No prefix shows an error; a formula is text
    until its closing delimiter and typeset from then on."""
    text = _math_answer(page, stack, browser_user, fake_model, "grace", "Ready: $x$.")
    expect(text.locator(".katex")).to_have_count(1)
    answer = r"Let $a+b$ be \(c\). Then $$\frac{a}{b}$$ and \[\sqrt{2}\] cost $5." + "\n\n$$\nx^2\n$$\n"
    results = page.evaluate("""async (answer) => {
        const { renderMarkdown } = await import("/static/web/markdown.js");
        const node = document.createElement("div");
        document.body.append(node);
        const results = [];
        for (let end = 1; end <= answer.length; end++) {
            renderMarkdown(node, answer.slice(0, end));
            results.push([end, node.querySelectorAll(".katex").length, node.querySelectorAll(".katex-error").length]);
        }
        node.remove();
        return results;
    }""", answer)
    assert all(errors == 0 for _, _, errors in results), [r for r in results if r[2]]
    counts = {end: katex for end, katex, _ in results}

    def typeset_once(closing: str, index: int = 0) -> int:
        """The count at the prefix ending with the ``index``-th ``closing``."""
        position = -1
        for _ in range(index + 1):
            position = answer.index(closing, position + 1)
        return counts[position + len(closing)]

    assert counts[answer.index("$a+b$") + 4] == 0  # "$a+b": open
    assert typeset_once("$a+b$") == 1
    assert counts[answer.index(r"\)")] == 1 and typeset_once(r"\)") == 2
    assert counts[answer.index("$$") + 12] == 2 and typeset_once(r"}$$") == 3
    assert counts[answer.index(r"\]") + 1] == 3 and typeset_once(r"\]") == 4
    assert counts[answer.index("cost $5.") + len("cost $5.")] == 4  # a price, not a formula
    assert counts[len(answer)] == 5


def test_math_is_readable_in_the_dark_theme_on_a_phone(phone_page: Page, stack, browser_user, fake_model,
                                                       screenshot):
    text = _math_answer(phone_page, stack, browser_user, fake_model, "noether", DELIMITERS)
    expect(text.locator(".katex-display")).to_have_count(3)
    colours = text.evaluate("""(el) => {
        const formula = getComputedStyle(el.querySelector(".katex")).color;
        const page = getComputedStyle(el).color;
        const background = getComputedStyle(document.body).backgroundColor;
        return { formula, page, background };
    }""")
    assert colours["formula"] == colours["page"], colours  # the formula takes the text's colour
    assert colours["formula"] != colours["background"], colours
    # A wide display formula scrolls inside itself instead of widening the page.
    assert phone_page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(phone_page, "chat-math-phone-dark")


def test_one_render_of_a_long_answer_with_fifty_formulas(page: Page, stack, browser_user, fake_model):
    """Measures (and prints) one render of a long answer with 50 formulas,
    first typeset and re-rendered with the formulas typeset before (the
    cache a streaming answer uses, one render per frame). No threshold: the
    numbers are for docs/web.md; the test checks what was rendered."""
    text = _math_answer(page, stack, browser_user, fake_model, "gauss", "Ready: $y$.")
    expect(text.locator(".katex")).to_have_count(1)
    answer = "\n\n".join(
        f"Step {i}: we have $\\frac{{x_{i}^2 + {i}}}{{\\sqrt{{{i} + y}}}} = \\sum_{{k=1}}^{{{i}}} k$ and more words "
        "to make the paragraph as long as a real answer's is." for i in range(50))
    timings = page.evaluate("""async (answer) => {
        const { renderMarkdown } = await import("/static/web/markdown.js");
        const node = document.createElement("div");
        document.body.append(node);
        let start = performance.now();
        renderMarkdown(node, answer);
        const first = performance.now() - start;
        const count = node.querySelectorAll(".katex").length;
        start = performance.now();
        renderMarkdown(node, answer + " One more word.");
        const again = performance.now() - start;
        node.remove();
        return { first, again, count };
    }""", answer)
    print(f"\none render, 50 formulas: first {timings['first']:.1f} ms, again (typeset before) {timings['again']:.1f} ms")
    assert timings["count"] == 50
