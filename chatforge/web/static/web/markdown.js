// Assistant text as Markdown: markdown-it renders it, highlight.js colours
// fenced code, DOMPurify sanitises the result. The libraries are vendored
// (static/web/vendor/README.md) and loaded by chat.html as globals.
//
// Safety, in layers: markdown-it runs with raw HTML off (a model's <script>
// or <img onerror> is shown as text) and refuses javascript:/vbscript:/
// file: links itself; DOMPurify then allows only http(s)/mailto links and
// removes every style attribute (the page's CSP forbids inline styles, and
// markdown-it puts table alignment in one) and any event handler.
//
// TeX formulas ($…$, \(…\), $$…$$, \[…\]) leave placeholders holding their
// source as text; renderMarkdown typesets them with KaTeX once the
// sanitised HTML is in the page (math.js says why it is done that way).

import { mathPlugin, typesetMath } from "./math.js";

const SAFE_URL = /^(?:https?:|mailto:|#)/i;

const PURIFY = {
  FORBID_ATTR: ["style"],
  FORBID_TAGS: ["style", "form", "input", "button", "iframe", "object", "embed"],
  ALLOWED_URI_REGEXP: SAFE_URL,
  ADD_ATTR: ["target"],
};

function highlight(code, lang) {
  const hljs = window.hljs;
  if (!hljs) return "";
  try {
    const language = lang && hljs.getLanguage(lang) ? lang : null;
    return language
      ? hljs.highlight(code, { language, ignoreIllegals: true }).value
      : hljs.highlightAuto(code).value;
  } catch {
    return ""; // markdown-it escapes the code itself
  }
}

// Built on first use: pages that import run_render.js without the vendored
// libraries (tool testing) never render Markdown.
let md = null;
function renderer() {
  if (md) return md;
  md = window.markdownit({ html: false, linkify: true, breaks: false, highlight, langPrefix: "hljs language-" });
  md.use(mathPlugin);
  // Table alignment comes as a style attribute, which the CSP refuses even
  // in markup being sanitised: drop it from the tokens, before any HTML.
  md.core.ruler.push("no_inline_styles", (state) => {
    for (const token of state.tokens) {
      for (const child of [token, ...(token.children || [])]) {
        if (child.attrs) child.attrs = child.attrs.filter(([name]) => name !== "style");
      }
    }
  });
  window.DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A") {
      if (!SAFE_URL.test(node.getAttribute("href") || "")) node.removeAttribute("href");
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    }
  });
  return md;
}

// The sanitised HTML of ``source``. Formulas in it are placeholders with
// their TeX as text; put the HTML in the page and call typesetMath on it to
// typeset them (renderMarkdown does both).
export function markdownToSafeHtml(source) {
  return window.DOMPurify.sanitize(renderer().render(source || ""), PURIFY).trim();
}

// The source each node shows, so a re-render with unchanged text is skipped
// (renders come once per animation frame while a run streams).
const shown = new WeakMap();

export function renderMarkdown(node, source) {
  if (shown.get(node) === source) return;
  shown.set(node, source);
  node.innerHTML = markdownToSafeHtml(source);
  typesetMath(node);
  for (const pre of node.querySelectorAll("pre")) addCopyButton(pre, () => pre.querySelector("code")?.textContent ?? pre.textContent);
}

// Source code (a tool's ``code`` argument) into ``node`` (a <code>),
// coloured by highlight.js when the page has it. The highlighted markup is
// only <span class> around escaped text, and goes through the sanitiser
// with nothing else allowed; without the libraries (the tool testing page)
// the code goes in as plain text.
const CODE_ONLY = { ALLOWED_TAGS: ["span"], ALLOWED_ATTR: ["class"] };
// Longer code is shown uncoloured: colouring 100,000 characters (the python
// tool's limit) would hold up the page's frame for no one's benefit.
const MAX_HIGHLIGHTED_CHARS = 20_000;

export function renderCode(node, source, language) {
  if (shown.get(node) === source) return;
  shown.set(node, source);
  const html = window.DOMPurify && source.length <= MAX_HIGHLIGHTED_CHARS ? highlight(source, language) : "";
  node.classList.toggle("hljs", Boolean(html));
  if (html) node.innerHTML = window.DOMPurify.sanitize(html, CODE_ONLY);
  else node.textContent = source;
}

// A "Copy" button on ``container`` that puts ``text()`` on the clipboard.
export function addCopyButton(container, text, label = "Copy") {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "copy-button";
  button.textContent = label;
  button.setAttribute("aria-label", label === "Copy" ? "Copy to the clipboard" : label);
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text());
      button.textContent = "Copied";
    } catch {
      button.textContent = "Copy failed";
    }
    setTimeout(() => { button.textContent = label; }, 1500);
  });
  container.append(button);
  return button;
}

export { typesetMath };
