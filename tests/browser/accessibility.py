"""Accessibility audits of our pages with axe-core, in the page as it is.

``assert_accessible(page, name=...)`` runs axe-core (vendored,
tests/browser/vendor/README.md) in the page's current state against the
WCAG 2.0 and 2.1 level A and AA rules, and fails listing each violation:
its rule, impact, help text and link, and the selectors of the elements.

How axe gets into the page without loosening the Content-Security-Policy:
``page.evaluate(source)`` runs the library through the DevTools protocol
(Runtime.evaluate), which the page's policy does not govern, unlike a
<script> tag (``page.add_script_tag`` is refused by ``script-src 'self'``)
or a context with ``bypass_csp`` (which would switch the policy off for the
whole page and so hide the very violations the page fixtures check for).
axe itself needs nothing the policy forbids: it reads the DOM and computed
styles, and adds no inline styles or scripts.

What gates: every violation of impact "serious" or "critical" fails the
audit, and so do "moderate" and "minor" ones — the WCAG A/AA rules have
few of those, each a real barrier for someone, and our pages have none, so
gating on all of them costs nothing and keeps it so. Rules outside WCAG
A/AA (axe's "best-practice" tag) are not run.
"""

from __future__ import annotations

import json
from pathlib import Path

from playwright.sync_api import Page

AXE_SOURCE = (Path(__file__).parent / "vendor" / "axe.min.js").read_text(encoding="utf-8")
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
GATED_IMPACTS = ("critical", "serious", "moderate", "minor")

_RUN = """async (tags) => {
    const results = await window.axe.run(document, {
        runOnly: { type: "tag", values: tags },
        resultTypes: ["violations"],
    });
    return results.violations.map((v) => ({
        id: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl,
        nodes: v.nodes.map((n) => ({ target: n.target.map(String).join(" "), summary: n.failureSummary })),
    }));
}"""


def audit(page: Page) -> list[dict]:
    """axe-core's WCAG 2.0/2.1 A and AA violations in ``page`` as it is now."""
    if not page.evaluate("() => Boolean(window.axe)"):
        page.evaluate(AXE_SOURCE)
    return page.evaluate(_RUN, WCAG_TAGS)


def describe(violations: list[dict]) -> str:
    lines = []
    for v in violations:
        lines.append(f"- {v['id']} ({v['impact']}): {v['help']} <{v['helpUrl']}>")
        for node in v["nodes"]:
            summary = " ".join((node["summary"] or "").split())
            lines.append(f"    {node['target']}: {summary}")
    return "\n".join(lines)


def assert_accessible(page: Page, *, name: str) -> None:
    """Fail, naming ``name`` (the page and state audited), when axe-core
    finds a gated violation in ``page`` now."""
    violations = [v for v in audit(page) if v["impact"] in GATED_IMPACTS]
    assert not violations, (
        f"Accessibility violations on {name} (WCAG 2.0/2.1 A and AA, axe-core):\n{describe(violations)}\n"
        f"raw: {json.dumps(violations)[:4000]}")
