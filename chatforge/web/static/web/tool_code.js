// The code view of a tool card (docs/web.md, "Code tools"): a call whose
// arguments are one ``code`` string (the sandboxed python tool, and any
// tool shaped like it) shows that code as a code block, coloured, with a
// Copy button, and its output as what the code printed, not as JSON.
// A script tool's arguments are data for the admin's script, not code, so
// they keep the JSON view; its output is the script's (JSON when it printed
// JSON). Everything goes in as text; the colouring goes through the
// sanitiser (markdown.js, renderCode).

import { addCopyButton, renderCode } from "./markdown.js";

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// The ``code`` of arguments shaped ``{"code": "<string>"}``; null for any
// other arguments (and while they are not yet valid JSON).
export function codeArgument(args) {
  let parsed;
  try { parsed = JSON.parse(args || ""); } catch { return null; }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) return null;
  const keys = Object.keys(parsed);
  return keys.length === 1 && keys[0] === "code" && typeof parsed.code === "string" ? parsed.code : null;
}

// The line the folded card's summary shows: the code's first line that says something.
export function codeSummary(code) {
  const line = code.split("\n").map((l) => l.trim()).find((l) => l && !l.startsWith("#")) || code.trim();
  return line.length > 80 ? `${line.slice(0, 77)}…` : line;
}

const codeSources = new WeakMap();

// The section drawn in a card's body in place of the JSON arguments.
export function codeSection() {
  const section = el("div", "tool-code");
  const head = el("div", "tool-code-head");
  head.append(el("span", "label", "Code"));
  const copy = addCopyButton(head, () => codeSources.get(section) || "");
  copy.classList.add("copy-code");
  copy.setAttribute("aria-label", "Copy the code");
  const pre = el("pre", "tool-code-block mono");
  pre.tabIndex = 0;  // scrolled sideways with the keyboard too
  pre.setAttribute("aria-label", "Code");
  pre.append(el("code"));
  section.append(head, pre);
  return section;
}

// Shows ``code`` (null hides the section). The python tool's code is
// coloured as Python; another code tool's by highlight.js' own guess.
export function renderCodeSection(section, toolName, code) {
  section.hidden = code === null;
  if (code === null) return;
  codeSources.set(section, code);
  renderCode(section.querySelector("code"), code, toolName === "python" ? "python" : null);
}
