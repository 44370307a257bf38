// TeX formulas in assistant Markdown: a markdown-it plugin that finds them,
// and the typesetting of the placeholders it leaves, with KaTeX (vendored,
// static/web/vendor/README.md; loaded by the page as the global `katex`).
//
// Delimiters: $…$ and \(…\) inline, $$…$$ and \[…\] display (on lines of
// their own they make a block; inside a paragraph they are typeset as
// display too). Code spans and code blocks are markdown-it's before this
// plugin sees them, so TeX in code stays code. Dollars follow the usual rule
// (pandoc's), so prices stay text: an opening $ has no space after it, the
// next $ closes it only with no space before it and no digit after it
// ("costs $5 and $10" has no formula, "$5, so $x$" has one: x). A formula that is not closed yet, as while an answer
// streams in, is plain text until its closing delimiter arrives.
//
// Why placeholders: KaTeX's renderToString puts style="" attributes in its
// HTML, which the page's Content-Security-Policy refuses (and the sanitiser
// drops). So the Markdown renderer emits <span|div class="math-tex"> holding
// the TeX as escaped text, the HTML goes through DOMPurify like all the
// rest, and once it is in the DOM `typesetMath` hands each placeholder's
// text to katex.render, which builds the formula with DOM calls (styles set
// through element.style, which the policy allows). Nothing KaTeX makes ever
// passes through an HTML string.

// KaTeX untrusted: no \href/\url links, no \htmlClass/\htmlStyle/\htmlId/
// \htmlData, no \includegraphics (trust: false; KaTeX shows such a command
// as its source in its error colour); no warnings on the console for
// LaTeX-incompatible input (strict: "ignore"); sizes and macro expansion
// bounded so a hostile formula cannot draw a page-sized box or expand
// without end. TeX that does not parse throws here (throwOnError: true) and
// is shown as its source by `rendered` itself: KaTeX's own error display
// sets its colour with setAttribute("style"), which the CSP blocks.
const KATEX_OPTIONS = {
  trust: false,
  strict: "ignore",
  throwOnError: true,
  maxSize: 20, // em
  maxExpand: 500,
  output: "htmlAndMathml", // MathML for screen readers, HTML for the eyes
  errorColor: "var(--bad)", // the unsupported commands: the theme's error colour, dark or light
};

// A formula longer than this is shown as its source: typesetting is not
// free, and no answer needs a 5,000-character formula.
const MAX_TEX_CHARS = 5_000;

function isSpace(code) {
  return code === 0x20 || code === 0x09 || code === 0x0a || code === 0x0d;
}

function isDigit(code) {
  return code >= 0x30 && code <= 0x39;
}

// Where `close` next occurs in `src` from `from` on, skipping backslash
// escapes (\$ is a dollar inside TeX, not the end of the formula); -1 when
// it does not.
function findClose(src, from, close, max) {
  for (let pos = from; pos + close.length <= max; pos++) {
    const ch = src.charCodeAt(pos);
    if (ch === 0x5c /* \ */) {
      if (src.startsWith(close, pos)) return pos;
      pos++; // the escaped character
      continue;
    }
    if (src.startsWith(close, pos)) return pos;
  }
  return -1;
}

function pushMath(state, tex, display, markup) {
  const token = state.push(display ? "math_inline_display" : "math_inline", "math", 0);
  token.content = tex;
  token.markup = markup;
}

// Inline rule, before markdown-it's "escape" (which would turn \( into a
// plain parenthesis).
function mathInline(state, silent) {
  const src = state.src;
  const start = state.pos;
  const max = state.posMax;
  const ch = src.charCodeAt(start);

  if (ch === 0x5c /* \ */) {
    const next = src[start + 1];
    if (next !== "(" && next !== "[") return false;
    const close = next === "(" ? "\\)" : "\\]";
    const end = findClose(src, start + 2, close, max);
    if (end < 0) return false; // not closed (yet): the escape rule shows "("
    const tex = src.slice(start + 2, end);
    if (!tex.trim()) return false;
    if (!silent) pushMath(state, tex, next === "[", next === "(" ? "\\(" : "\\[");
    state.pos = end + 2;
    return true;
  }

  if (ch !== 0x24 /* $ */) return false;

  if (src.charCodeAt(start + 1) === 0x24) {
    // $$…$$ inside a paragraph: display. Unclosed, both dollars are text,
    // so "$$x" is never read as "$" and a formula starting at "$x".
    const end = findClose(src, start + 2, "$$", max);
    const tex = end < 0 ? "" : src.slice(start + 2, end);
    if (!tex.trim()) {
      if (!silent) state.pending += "$$";
      state.pos = start + 2;
      return true;
    }
    if (!silent) pushMath(state, tex, true, "$$");
    state.pos = end + 2;
    return true;
  }

  // $…$: no space after the opening dollar…
  if (start + 1 >= max || isSpace(src.charCodeAt(start + 1))) return false;
  // …and the next dollar closes it if it has no space before it and no
  // digit after it. If the next dollar does not qualify, this one opens no
  // formula: looking further would make "$6.75, from $\frac{a}{b}$" one
  // formula from the price to the fraction's end.
  const end = findClose(src, start + 1, "$", max);
  if (end < 0 || isSpace(src.charCodeAt(end - 1)) || isDigit(src.charCodeAt(end + 1))) return false;
  if (!silent) pushMath(state, src.slice(start + 1, end), false, "$");
  state.pos = end + 1;
  return true;
}

// Block rule: a line starting with $$ or \[ opens a display formula that
// ends on the line ending with $$ or \] (the same line or a later one).
// Unclosed, it is no block, and the paragraph shows the text.
function mathBlock(state, startLine, endLine, silent) {
  let pos = state.bMarks[startLine] + state.tShift[startLine];
  let max = state.eMarks[startLine];
  if (state.sCount[startLine] - state.blkIndent >= 4) return false; // indented code
  const src = state.src;
  let open;
  let close;
  if (src.startsWith("$$", pos)) {
    open = "$$";
    close = "$$";
  } else if (src.startsWith("\\[", pos)) {
    open = "\\[";
    close = "\\]";
  } else {
    return false;
  }
  pos += open.length;

  let line = startLine;
  let first = src.slice(pos, max).trimEnd();
  let tex;
  let found = false;
  if (first.endsWith(close) && first.length >= close.length) {
    // One line: $$ x $$ (the formula must end the line).
    tex = first.slice(0, -close.length);
    found = true;
  } else if (first.includes(close)) {
    return false; // "$$a$$ and more": a paragraph, with the formula inline
  } else {
    const lines = [first];
    while (++line < endLine) {
      pos = state.bMarks[line] + state.tShift[line];
      max = state.eMarks[line];
      if (pos < max && state.sCount[line] < state.blkIndent) break; // outdented: the block ended
      const text = src.slice(pos, max).trimEnd();
      if (!text) break; // a blank line: TeX allows none in a formula, so no block
      if (text.endsWith(close)) {
        lines.push(text.slice(0, -close.length));
        found = true;
        break;
      }
      lines.push(text);
    }
    tex = lines.join("\n");
  }
  if (!found || !tex.trim()) return false;
  if (silent) return true;

  state.line = line + 1;
  const token = state.push("math_block", "math", 0);
  token.block = true;
  token.content = tex;
  token.markup = open;
  token.map = [startLine, state.line];
  return true;
}

function placeholder(tag, mode, tex, escapeHtml) {
  return `<${tag} class="math-tex" data-math="${mode}">${escapeHtml(tex)}</${tag}>`;
}

export function mathPlugin(md) {
  const escapeHtml = md.utils.escapeHtml;
  md.inline.ruler.before("escape", "math_inline", mathInline);
  md.block.ruler.after("fence", "math_block", mathBlock, { alt: ["paragraph", "reference", "blockquote", "list"] });
  md.renderer.rules.math_inline = (tokens, idx) => placeholder("span", "inline", tokens[idx].content, escapeHtml);
  md.renderer.rules.math_inline_display = (tokens, idx) => placeholder("span", "display", tokens[idx].content, escapeHtml);
  md.renderer.rules.math_block = (tokens, idx) => `${placeholder("div", "display", tokens[idx].content, escapeHtml)}\n`;
}

// Typeset formulas by mode and TeX, kept so that the many re-renders of a
// streaming answer (one per animation frame) typeset each formula once and
// copy it after that. Bounded: the oldest go first. An entry is a <span>
// holding the typeset formula, or for TeX that does not parse the error's
// message (`error`) and nothing else.
const typeset = new Map();
const MAX_CACHED = 500;

function rendered(tex, display) {
  const key = `${display ? "D" : "I"}${tex}`;
  let entry = typeset.get(key);
  if (entry) {
    typeset.delete(key); // to the end: most recently used
  } else {
    entry = { node: document.createElement("span"), error: null };
    try {
      window.katex.render(tex, entry.node, { ...KATEX_OPTIONS, displayMode: display });
    } catch (error) {
      if (!(error instanceof window.katex.ParseError)) throw error;
      entry.node.replaceChildren();
      entry.error = error.message;
    }
    if (typeset.size >= MAX_CACHED) typeset.delete(typeset.keys().next().value);
  }
  typeset.set(key, entry);
  return entry;
}

// Typesets the .math-tex placeholders under `root`. Without KaTeX on the
// page the TeX source stays as the placeholder's text; TeX that does not
// parse too, marked .katex-error (coloured by app.css) with KaTeX's message
// as its title.
export function typesetMath(root) {
  if (!window.katex) return;
  for (const element of root.querySelectorAll(".math-tex:not([data-typeset])")) {
    const tex = element.textContent;
    element.setAttribute("data-typeset", "");
    if (tex.length > MAX_TEX_CHARS) {
      element.classList.add("katex-error");
      element.title = `This formula is longer than ${MAX_TEX_CHARS} characters and is shown as its source.`;
      continue;
    }
    const display = element.dataset.math === "display";
    const { node, error } = rendered(tex, display);
    if (error) {
      element.classList.add("katex-error");
      element.title = error;
      continue;
    }
    // A copy: the cached nodes never go into the page themselves, so one
    // formula can show in many places. Cloning keeps the styles KaTeX set.
    element.replaceChildren(...[...node.childNodes].map((child) => child.cloneNode(true)));
  }
}
