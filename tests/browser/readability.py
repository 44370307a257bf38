"""What a reader sees, measured in the page: the WCAG contrast of an
element's text against what is behind it, and elements that stick out of
the screen. Computed from the styles Chromium applied, so a rule that loses
to another one (or a colour the dark theme forgot) shows up as a number."""

from __future__ import annotations

from playwright.sync_api import Locator, Page

# WCAG 2's minimum for normal text (level AA).
READABLE = 4.5

# The text colour over the background the element shows: its own, else the
# nearest ancestor's; translucent backgrounds are laid over what is under
# them, down to the first opaque one (the page always has one: <body>).
_CONTRAST_JS = """
(el) => {
  const parse = (css) => {
    const m = css.match(/^rgba?\\(([^)]*)\\)$/);
    if (!m) throw new Error(`unexpected colour ${css}`);
    const [r, g, b, a = 1] = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number);
    return { r, g, b, a };
  };
  const over = (top, under) => ({
    r: top.r * top.a + under.r * (1 - top.a),
    g: top.g * top.a + under.g * (1 - top.a),
    b: top.b * top.a + under.b * (1 - top.a),
    a: 1,
  });
  const layers = [];
  for (let node = el; node; node = node.parentElement) {
    const background = parse(getComputedStyle(node).backgroundColor);
    if (background.a > 0) layers.push(background);
    if (background.a >= 1) break;
  }
  let behind = { r: 255, g: 255, b: 255, a: 1 };
  for (const layer of layers.reverse()) behind = over(layer, behind);
  const text = over(parse(getComputedStyle(el).color), behind);
  const luminance = ({ r, g, b }) => {
    const [R, G, B] = [r, g, b].map((v) => {
      const c = v / 255;
      return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * R + 0.7152 * G + 0.0722 * B;
  };
  const [light, dark] = [luminance(text), luminance(behind)].sort((x, y) => y - x);
  return (light + 0.05) / (dark + 0.05);
}
"""


def contrast(locator: Locator) -> float:
    """The contrast ratio (1 to 21) of ``locator``'s text."""
    return locator.evaluate(_CONTRAST_JS)


def unreadable(parts: dict[str, Locator]) -> dict[str, float]:
    """Those of ``parts`` (name → element) whose text is below ``READABLE``."""
    ratios = {name: round(contrast(locator), 2) for name, locator in parts.items()}
    return {name: ratio for name, ratio in ratios.items() if ratio < READABLE}


# Every drawn element whose right edge is beyond the viewport, described.
_STICKING_OUT_JS = """
() => {
  const width = document.documentElement.clientWidth;
  const out = [];
  for (const el of document.querySelectorAll("body *")) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 && box.height === 0) continue;
    if (box.right > width + 0.5) {
      out.push(`${el.tagName.toLowerCase()}.${[...el.classList].join(".")} right=${Math.round(box.right)}`);
    }
  }
  return out;
}
"""


def sticking_out(page: Page) -> list[str]:
    """Elements wider than the screen reaches (none, on a page that fits)."""
    return page.evaluate(_STICKING_OUT_JS)
