// Draws a run state (run_state.js) into an <article>. Elements are keyed by
// round iteration and tool call id and updated in place, so streaming text
// does not rebuild the page and a card the reader opened stays open.
// Tool arguments and outputs go in as text, never as HTML; the model's text
// is rendered as Markdown through the sanitiser (markdown.js).

import { renderStoredFiles } from "./attachments.js";
import { addCopyButton, renderMarkdown } from "./markdown.js";
import { TERMINAL } from "./run_state.js";
import { codeArgument, codeSection, codeSummary, renderCodeSection } from "./tool_code.js";

const CACHED_TITLE = "Served from the cache: the tool did not run again";

const STATUS_LABELS = {
  queued: "queued", running: "running", completed: "completed",
  failed: "failed", cancelled: "cancelled",
};

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

// JSON shown indented; anything else as it came.
export function pretty(text) {
  if (typeof text !== "string") return JSON.stringify(text, null, 2);
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
}

export function formatMs(ms) {
  if (ms === null || ms === undefined) return "";
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

export function createRunArticle(runId) {
  const article = el("article", "msg assistant");
  article.dataset.runId = runId || "";
  const header = el("div", "msg-header");
  // Who answered: the assistant profile (when the run used one) and the model.
  const profile = el("span", "answer-assistant");
  profile.title = "Assistant profile";
  profile.hidden = true;
  const model = el("span", "answer-model mono");
  model.title = "Model";
  model.hidden = true;
  // Transient notes on the run (a retry, "Reconnecting the run…"): read out as they change.
  const notice = el("span", "notice");
  notice.setAttribute("role", "status");
  notice.setAttribute("aria-live", "polite");  // implied by the role; said for older screen readers
  header.append(el("span", "who", "Assistant"), profile, model, el("span", "badge run-status"), notice);
  article.append(header, el("div", "rounds"), el("p", "run-outcome"));
  return article;
}

function toolCard(tool) {
  const card = el("details", "tool-card");
  card.dataset.toolId = tool.id;
  const summary = el("summary");
  summary.append(
    el("span", "spinner"), el("span", "tool-name mono"), el("span", "tool-args-inline mono"),
    el("span", "badge tool-status"), cachedBadge(), el("span", "tool-duration"), el("span", "tool-attempts"),
  );
  const body = el("div", "tool-body");
  body.append(approvalBar(), el("div", "label tool-args-label", "Arguments"), el("pre", "tool-args mono"),
    codeSection(), el("div", "label tool-output-label", "Output"), el("pre", "tool-output mono"),
    el("p", "tool-retry"));
  card.append(summary, body);
  return card;
}

// Shown on a call whose result came from the tool result cache
// (``cached: true`` on its tool_output event and its stored result).
function cachedBadge() {
  const badge = el("span", "badge tool-cached", "cached");
  badge.title = CACHED_TITLE;
  badge.hidden = true;
  return badge;
}

// Approve / Deny for a call that waits for the user. A click dispatches a
// bubbling "tool-decision" event {runId, toolCallId, decision, reason}; the
// page sends it (chat.js), and the run's approval.decided event redraws.
function approvalBar() {
  const bar = el("div", "tool-approval");
  const reason = el("input", "approval-reason");
  reason.type = "text";
  reason.maxLength = 2000;
  reason.placeholder = "Reason (optional, shown to the model if you deny)";
  reason.setAttribute("aria-label", "Reason for the decision");
  const approve = el("button", "approve-tool", "Approve");
  const deny = el("button", "deny-tool secondary", "Deny");
  for (const [button, decision] of [[approve, "approve"], [deny, "deny"]]) {
    button.type = "button";
    button.addEventListener("click", () => {
      const card = bar.closest(".tool-card");
      const article = bar.closest("article");
      approve.disabled = deny.disabled = true;
      bar.dispatchEvent(new CustomEvent("tool-decision", {
        bubbles: true,
        detail: { runId: article.dataset.runId, toolCallId: card.dataset.toolId, decision,
                  reason: reason.value.trim(), done: () => { approve.disabled = deny.disabled = false; } },
      }));
    });
  }
  bar.append(el("p", "approval-question"), reason, el("div", "approval-buttons"), el("p", "approval-outcome"));
  bar.querySelector(".approval-buttons").append(approve, deny);
  return bar;
}

function approvalText(tool) {
  const approval = tool.approval || {};
  if (!approval.decision) return "";
  if (approval.expired) return "Not run: no decision came in time.";
  const who = approval.by ? ` by ${approval.by}` : "";
  const why = approval.reason ? ` (${approval.reason})` : "";
  return approval.decision === "approve" ? `Approved${who}.` : `Denied${who}${why}.`;
}

function renderApproval(card, tool) {
  const bar = card.querySelector(".tool-approval");
  const waiting = tool.status === "awaiting_approval";
  bar.hidden = !waiting && !(tool.approval && tool.approval.decision);
  bar.dataset.waiting = String(waiting);
  const expires = tool.approval && tool.approval.expiresAt ? new Date(tool.approval.expiresAt) : null;
  setText(bar.querySelector(".approval-question"), waiting
    ? `This tool asks for your approval before it runs${expires ? ` (until ${expires.toLocaleTimeString()})` : ""}.`
    : "");
  bar.querySelector(".approval-reason").hidden = !waiting;
  bar.querySelector(".approval-buttons").hidden = !waiting;
  setText(bar.querySelector(".approval-outcome"), approvalText(tool));
  if (waiting) card.open = true;  // the question must be seen
}

function renderTool(card, tool) {
  card.dataset.toolName = tool.name;
  card.dataset.status = tool.status;
  setText(card.querySelector(".tool-name"), tool.name);
  const args = tool.arguments || "{}";
  // A code tool's call (tool_code.js) shows its code, and what it printed as printed.
  const code = codeArgument(args);
  card.classList.toggle("code-call", code !== null);
  setText(card.querySelector(".tool-args-inline"),
    code !== null ? codeSummary(code) : args.length > 80 ? `${args.slice(0, 77)}…` : args);
  setText(card.querySelector(".tool-status"), tool.status.replaceAll("_", " "));
  card.querySelector(".tool-status").dataset.status = tool.status;
  card.querySelector(".tool-cached").hidden = tool.cached !== true;
  setText(card.querySelector(".tool-duration"), formatMs(tool.ms));
  setText(card.querySelector(".tool-attempts"), tool.attempts > 1 ? `attempt ${tool.attempts}` : "");
  card.querySelector(".tool-args-label").hidden = card.querySelector(".tool-args").hidden = code !== null;
  if (code === null) setText(card.querySelector(".tool-args"), pretty(args));
  renderCodeSection(card.querySelector(".tool-code"), tool.name, code);
  const failed = tool.status === "error" || tool.status === "timeout";
  setText(card.querySelector(".tool-output-label"), failed ? "Error" : "Output");
  const output = card.querySelector(".tool-output");
  output.classList.toggle("failed", failed);
  setText(output, tool.status === "running" ? "running…"
    : tool.status === "awaiting_approval" ? "waiting for your decision…"
    : code !== null ? tool.output : pretty(tool.output));
  setText(card.querySelector(".tool-retry"),
    tool.lastError && tool.status === "running" ? `Retrying after: ${tool.lastError}` : "");
  renderApproval(card, tool);
}

// The files a tool returned, under its card and joined to it: outside the
// card's <details>, so an image stays in view once the run folds its cards.
function renderToolFiles(card, tool) {
  let files = card.nextElementSibling;
  if (!files || !files.classList.contains("tool-files")) {
    if (!(tool.files && tool.files.length)) return;
    files = el("ul", "file-list tool-files");
    files.dataset.toolId = tool.id;
    files.setAttribute("aria-label", `Files from ${tool.name}`);
    card.after(files);
  }
  renderStoredFiles(files, tool.files);
  card.classList.toggle("has-files", !files.hidden);
}

function roundElement(container, round, live) {
  let node = container.querySelector(`:scope > .round[data-iteration="${round.iteration}"]`);
  if (!node) {
    node = el("section", "round");
    node.dataset.iteration = String(round.iteration);
    const reasoning = el("details", "reasoning");
    reasoning.append(el("summary", null, "Reasoning"), el("pre", "reasoning-text"));
    node.append(reasoning, el("div", "round-text"), el("div", "tools"));
    // Keep rounds in iteration order even if one arrives late.
    const after = [...container.children].find((c) => Number(c.dataset.iteration) > round.iteration);
    container.insertBefore(node, after || null);
  }
  const reasoning = node.querySelector(".reasoning");
  reasoning.hidden = !round.reasoning;
  setText(reasoning.querySelector(".reasoning-text"), round.reasoning);
  renderMarkdown(node.querySelector(".round-text"), round.text);
  const tools = node.querySelector(".tools");
  for (const tool of round.tools) {
    let card = tools.querySelector(`:scope > .tool-card[data-tool-id="${CSS.escape(tool.id)}"]`);
    if (!card) {
      card = toolCard(tool);
      card.open = live;
      tools.append(card);
    }
    renderTool(card, tool);
    renderToolFiles(card, tool);
  }
  return node;
}

// The Markdown source of a finished answer: every round's text, in order.
export function answerSource(state) {
  return state.rounds.map((round) => round.text).filter(Boolean).join("\n\n");
}

const copySources = new WeakMap();

function addMessageCopyButton(article, state) {
  copySources.set(article, answerSource(state));
  if (article.querySelector(".msg-header .copy-button")) return;
  const button = addCopyButton(article.querySelector(".msg-header"), () => copySources.get(article) || "");
  button.classList.add("copy-message");
  button.setAttribute("aria-label", "Copy this answer");
}

function renderAnswerer(article, state) {
  const profile = article.querySelector(".answer-assistant");
  setText(profile, state.assistant || "");
  profile.hidden = !state.assistant;
  const model = article.querySelector(".answer-model");
  setText(model, state.model || "");
  model.hidden = !state.model;
}

// Draws ``state``; ``connection`` is "", "connecting" or "reconnecting".
export function renderRun(article, state, connection = "") {
  const live = !TERMINAL.has(state.status);
  article.dataset.status = state.status;
  const badge = article.querySelector(".run-status");
  setText(badge, STATUS_LABELS[state.status] || state.status);
  badge.dataset.status = state.status;
  const notice = connection === "reconnecting" ? "Connection lost; reconnecting…" : state.notice;
  setText(article.querySelector(".notice"), live ? notice : "");
  renderAnswerer(article, state);
  const rounds = article.querySelector(".rounds");
  const kept = new Set();
  for (const round of state.rounds) kept.add(roundElement(rounds, round, live));
  // A snapshot may have dropped rounds (a re-run turn): remove their elements.
  for (const child of [...rounds.children]) if (!kept.has(child)) child.remove();
  if (!live && article.dataset.folded !== "true") {
    // docs/web.md, "Chat": once the run ends, the tool history folds
    // away and the answer stays in view.
    article.dataset.folded = "true";
    article.querySelectorAll(".tool-card").forEach((card) => { card.open = false; });
  }
  if (!live) addMessageCopyButton(article, state);
  const outcome = article.querySelector(".run-outcome");
  outcome.className = `run-outcome ${state.status}`;
  let text = "";
  if (state.status === "failed") text = `Failed: ${state.error || "the run failed."}`;
  else if (state.status === "cancelled") text = "Stopped: the run was cancelled.";
  else if (state.status === "completed" && state.maxIterationsReached) {
    text = "The tool-call limit was reached; the model answered with what it had.";
  } else if (state.status === "queued") text = "Waiting to start…";
  setText(outcome, text);
}
