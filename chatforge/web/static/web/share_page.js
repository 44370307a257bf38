// A shared conversation (/share/<token>/): the snapshot the page carries
// (json_script "share-data"), drawn read-only. The model's text goes
// through the chat page's Markdown renderer (markdown.js); tool calls are
// cards to open, with their arguments and output as text, never as HTML.
// Files are named only: their bytes are not part of a share.

import { renderMarkdown } from "./markdown.js";

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function pretty(text) {
  if (typeof text !== "string") return JSON.stringify(text, null, 2);
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
}

function timeLabel(iso) {
  const time = el("time", "msg-time", new Date(iso).toLocaleString());
  time.dateTime = iso;
  return time;
}

function toolCard(call, result) {
  const status = (result && result.status) || "error";
  const card = el("details", "tool-card");
  card.dataset.status = status;
  const summary = el("summary");
  const badge = el("span", "badge tool-status", status);
  badge.dataset.status = status;
  summary.append(el("span", "tool-name mono", call.name), el("span", "tool-args-inline mono", call.arguments || ""),
    badge);
  const body = el("div", "tool-body");
  body.append(el("div", "label", "Arguments"), el("pre", "tool-args mono", pretty(call.arguments || "")),
    el("div", "label", "Output"), el("pre", "tool-output mono", pretty((result && result.output) || "")));
  card.append(summary, body);
  return card;
}

function textBlock(source) {
  const node = el("div", "round-text");
  renderMarkdown(node, source);
  return node;
}

function fileNames(attachments) {
  const list = el("ul", "file-list share-files");
  list.setAttribute("aria-label", "Attached files (names only)");
  for (const file of attachments) list.append(el("li", "file-chip", `${file.name} (not shared)`));
  return list;
}

function article(message) {
  const mine = message.role === "user";
  const node = el("article", `msg ${mine ? "user" : "assistant"}`);
  const header = el("div", "msg-header");
  header.append(el("span", "who", mine ? "User" : "Assistant"));
  if (message.model) header.append(el("span", "badge", message.model));
  if (message.status && message.status !== "final") header.append(el("span", "badge", message.status));
  header.append(timeLabel(message.created_at));
  node.append(header);
  if (mine) {
    node.append(el("div", "round-text", message.content));
  } else {
    for (const round of message.tool_rounds || []) {
      if (round.assistant_response) node.append(textBlock(round.assistant_response));
      const results = new Map((round.results || []).map((r) => [r.tool_call_id, r]));
      const tools = el("div", "tools");
      for (const call of round.tool_calls || []) tools.append(toolCard(call, results.get(call.id)));
      node.append(tools);
    }
    if (message.content) node.append(textBlock(message.content));
  }
  if (message.attachments && message.attachments.length) node.append(fileNames(message.attachments));
  return node;
}

const data = JSON.parse(document.getElementById("share-data").textContent);
const history = document.getElementById("share-history");
history.replaceChildren(...data.messages.map(article));
if (!data.messages.length) history.append(el("p", "muted", "This conversation had no messages when it was shared."));
document.body.dataset.shareReady = "true";
