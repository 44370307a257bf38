// The chat page: history, sending, live runs over the run websocket, stop,
// and resuming after a dropped connection or a page reload.
//
// Each live run keeps its state (run_state.js) in sessionStorage after every
// event. A reload draws that state at once and reconnects with
// ``?after=<last seq>``, so the server sends only what the page has not
// seen; without a saved state it replays the run from its first event.

import { api, pageData } from "./api.js";
import { ComposerFiles, storedFilesList } from "./attachments.js";
import { applyEvent, newRunState, stateFromMessage, TERMINAL } from "./run_state.js";
import { setUpDelete, setUpDrawer, setUpRename, setUpSearch, showConversationButtons } from "./conversations.js";
import { addRegenerateButton, addTimestamp, addUserMessageActions, postReplacing } from "./message_actions.js";
import { createRunArticle, renderRun } from "./run_render.js";

const page = pageData();
const historyEl = document.getElementById("history");
const form = document.getElementById("composer");
const input = document.getElementById("message-input");
const sendButton = document.getElementById("send-button");
const stopButton = document.getElementById("stop-button");
const errorEl = document.getElementById("composer-error");
const modelSelect = document.getElementById("model-select");
const assistantSelect = document.getElementById("assistant-select");
const allToolsBox = document.getElementById("tools-all");
const toolBoxes = [...document.querySelectorAll("input[name=tool]")];

let conversationId = page.conversation ? page.conversation.id : null;
const liveRuns = new Map(); // run id -> {state, article, socket, attempts, connection}
const STORAGE_PREFIX = "chatforge.run.";
const PREFS_KEY = "chatforge.chat.prefs";

// ---------------------------------------------------------------- pickers

function loadPrefs() {
  try { return JSON.parse(localStorage.getItem(PREFS_KEY)) || {}; } catch { return {}; }
}

function savePrefs() {
  localStorage.setItem(PREFS_KEY, JSON.stringify({
    model: modelSelect.value,
    assistant: assistantSelect.value,
    allTools: allToolsBox.checked,
    tools: toolBoxes.filter((b) => b.checked).map((b) => b.value),
  }));
}

function restorePrefs() {
  const prefs = loadPrefs();
  if (prefs.model !== undefined && [...modelSelect.options].some((o) => o.value === prefs.model)) modelSelect.value = prefs.model;
  if (prefs.assistant !== undefined && [...assistantSelect.options].some((o) => o.value === prefs.assistant)) assistantSelect.value = prefs.assistant;
  if (prefs.allTools === false) {
    allToolsBox.checked = false;
    toolBoxes.forEach((b) => { b.checked = (prefs.tools || []).includes(b.value); });
  }
  syncToolBoxes();
}

function syncToolBoxes() {
  toolBoxes.forEach((b) => { b.disabled = allToolsBox.checked; });
  const chosen = toolBoxes.filter((b) => b.checked).length;
  document.getElementById("tools-summary").textContent = allToolsBox.checked
    ? "Tools: all" : `Tools: ${chosen} chosen`;
}

function runOptions() {
  const options = { on_active: "enqueue" };
  if (modelSelect.value) options.model = modelSelect.value;
  if (assistantSelect.value) options.assistant = assistantSelect.value;
  if (!allToolsBox.checked) options.tools = toolBoxes.filter((b) => b.checked).map((b) => b.value);
  return options;
}

// ---------------------------------------------------------------- history

const sendReplacing = () => postReplacing(conversationId, runOptions);
// The question each user article shows ({id, content}), for Regenerate.
const questions = new WeakMap();

function userArticle(message) {
  const article = document.createElement("article");
  article.className = "msg user";
  article.dataset.messageId = message.id;
  const header = document.createElement("div");
  header.className = "msg-header";
  const who = document.createElement("span");
  who.className = "who";
  who.textContent = "You";
  header.append(who);
  const text = document.createElement("div");
  text.className = "round-text";
  text.textContent = message.content;
  article.append(header, text);
  if (message.attachments && message.attachments.length) article.append(storedFilesList(message.attachments, "message-files"));
  addTimestamp(article, message.created_at || new Date().toISOString());
  if (message.id && conversationId) addUserMessageActions(article, message, sendReplacing());
  questions.set(article, message);
  return article;
}

function storedAssistantArticle(message) {
  const state = stateFromMessage(message);
  state.error = message.run_error || "";
  const article = createRunArticle(message.run);
  article.dataset.messageId = message.id;
  renderRun(article, state);
  addTimestamp(article, message.created_at);
  return article;
}

// "Regenerate" on the last answer, when nothing is running: it sends the
// last question again in place of itself and what followed it. Decided from
// what the page shows, so an answer that just finished live gets it as a
// reloaded one does, and an older answer loses it once a new question is sent.
function offerRegenerate() {
  historyEl.querySelectorAll(".msg-header .regenerate").forEach((button) => button.remove());
  if ([...liveRuns.values()].some((live) => !TERMINAL.has(live.state.status))) return;
  const articles = [...historyEl.querySelectorAll(":scope > article")];
  const answer = articles.pop();
  if (!answer || !answer.classList.contains("assistant")) return;
  const question = questions.get(articles.reverse().find((a) => a.classList.contains("user")));
  if (question && question.id) addRegenerateButton(answer, question, sendReplacing());
}

// A live run has ended: its reply gets what a reloaded page draws for a
// stored answer (its id, its time, and Regenerate if it is the last).
function finishRun(live) {
  const { article, state } = live;
  if (state.messageId) article.dataset.messageId = state.messageId;
  addTimestamp(article, state.endedAt || new Date().toISOString());
  offerRegenerate();
}

// Follow the answer: the history stays at its end while a reply streams,
// unless the reader scrolled up to read; then "Jump to latest" appears, and
// following resumes once they are back at the end. Decided by the reader's
// own scrolling, not by how far the end is at render time: a large chunk of
// text must not stop the following.
const jumpButton = document.getElementById("jump-to-latest");
const AT_END_PX = 40;
let following = true;

function atEnd() {
  return historyEl.scrollHeight - historyEl.scrollTop - historyEl.clientHeight <= AT_END_PX;
}

function scrollToEnd() {
  if (following) historyEl.scrollTop = historyEl.scrollHeight;
  jumpButton.hidden = following || atEnd();
}

function jumpToLatest() {
  following = true;
  historyEl.scrollTop = historyEl.scrollHeight;
  jumpButton.hidden = true;
}

historyEl.addEventListener("scroll", () => {
  following = atEnd();
  if (following) jumpButton.hidden = true;
});
jumpButton.addEventListener("click", jumpToLatest);

function renderHistory() {
  if (page.older_messages_hidden) {
    const note = document.createElement("p");
    note.className = "muted center";
    note.textContent = `${page.older_messages_hidden} older messages are not shown.`;
    historyEl.append(note);
  }
  for (const message of page.messages) {
    historyEl.append(message.role === "user" ? userArticle(message) : storedAssistantArticle(message));
  }
  document.getElementById("empty-state").hidden = page.messages.length > 0;
  jumpToLatest();
}

// ---------------------------------------------------------------- live runs

function savedState(runId) {
  try {
    const state = JSON.parse(sessionStorage.getItem(STORAGE_PREFIX + runId));
    return state && state.runId === runId ? state : null;
  } catch { return null; }
}

function forgetEndedRuns() {
  const active = new Set(page.active_runs.map((r) => r.id));
  for (let i = sessionStorage.length - 1; i >= 0; i -= 1) {
    const key = sessionStorage.key(i);
    if (key.startsWith(STORAGE_PREFIX) && !active.has(key.slice(STORAGE_PREFIX.length))) sessionStorage.removeItem(key);
  }
}

function socketUrl(runId, after) {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const query = after > 0 ? `?after=${after}` : "";
  return `${scheme}://${location.host}/ws/runs/${runId}/${query}`;
}

let renderQueued = false;
function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    for (const live of liveRuns.values()) {
      if (live.dirty) { live.dirty = false; renderRun(live.article, live.state, live.connection); }
      if (TERMINAL.has(live.state.status) && !live.finished) { live.finished = true; finishRun(live); }
    }
    updateStopButton();
    scrollToEnd();
  });
}

function updateStopButton() {
  const running = [...liveRuns.values()].some((l) => !TERMINAL.has(l.state.status));
  stopButton.hidden = !running;
  stopButton.disabled = !running;
}

function connect(live) {
  const { state } = live;
  const socket = new WebSocket(socketUrl(state.runId, state.lastSeq));
  live.socket = socket;
  socket.onopen = () => {
    live.attempts = 0;
    live.connection = "";
    live.dirty = true;
    scheduleRender();
  };
  socket.onmessage = (message) => {
    let event;
    try { event = JSON.parse(message.data); } catch { return; }
    if (!applyEvent(state, event)) return;
    live.dirty = true;
    if (TERMINAL.has(state.status)) sessionStorage.removeItem(STORAGE_PREFIX + state.runId);
    else sessionStorage.setItem(STORAGE_PREFIX + state.runId, JSON.stringify(state));
    scheduleRender();
  };
  socket.onclose = () => {
    if (TERMINAL.has(state.status) || live.stopped) return;
    // Dropped before the run ended: come back from the last seq we have.
    live.connection = "reconnecting";
    live.dirty = true;
    scheduleRender();
    const delay = Math.min(5000, 250 * 2 ** live.attempts);
    live.attempts += 1;
    setTimeout(() => connect(live), delay);
  };
}

function follow(runId, article, status = "queued") {
  const state = savedState(runId) || newRunState(runId, status);
  const live = {
    state, article, socket: null, attempts: 0, connection: "connecting", dirty: true, stopped: false, finished: false,
  };
  liveRuns.set(runId, live);
  offerRegenerate();  // nothing is regenerated while a run is live
  renderRun(article, state);
  connect(live);
  scheduleRender();
  return live;
}

function resumeActiveRuns() {
  for (const run of page.active_runs) {
    const article = createRunArticle(run.id);
    const userMessage = historyEl.querySelector(`article.user[data-message-id="${run.user_message_id}"]`);
    if (userMessage) userMessage.after(article);
    else historyEl.append(article);
    follow(run.id, article, run.status);
  }
}

// ---------------------------------------------------------------- sending

function showError(text) {
  errorEl.textContent = text;
  errorEl.hidden = !text;
}

function addToSidebar(conversation) {
  const list = document.getElementById("conversation-list");
  const link = document.createElement("a");
  link.href = `/c/${conversation.id}/`;
  link.className = "conversation current";
  link.dataset.conversationId = conversation.id;
  const title = document.createElement("span");
  title.className = "title";
  title.textContent = conversation.title || "Untitled";
  link.append(title);
  list.querySelectorAll(".current").forEach((c) => c.classList.remove("current"));
  list.prepend(link);
  document.getElementById("no-conversations")?.remove();
}

// Send waits for the uploads: a message names only files the server has.
let sending = false;
function updateSendButton() {
  sendButton.disabled = sending || files.uploading();
  sendButton.title = files.uploading() ? "Waiting for the files to upload" : "";
}

const files = new ComposerFiles({
  list: document.getElementById("attachment-list"),
  button: document.getElementById("attach-button"),
  fileInput: document.getElementById("file-input"),
  dropZones: [form, historyEl],
  pasteTarget: form,
  conversationId: () => conversationId,
  onChange: () => updateSendButton(),
});

async function send(event) {
  event.preventDefault();
  if (sending) return;
  if (files.uploading()) { showError("Wait for the files to finish uploading."); return; }
  const content = input.value;
  const attached = files.ready();
  if (!content.trim() && !attached.length) { showError("Type a message first."); return; }
  showError("");
  sending = true;
  updateSendButton();
  try {
    if (!conversationId) {
      const title = (content.trim() || attached[0].name).slice(0, 80);
      const conversation = await api("POST", "/api/conversations/", { title });
      conversationId = conversation.id;
      history.replaceState(null, "", `/c/${conversationId}/`);
      document.getElementById("conversation-title").textContent = conversation.title;
      addToSidebar(conversation);
      showConversationButtons();
    }
    const body = { content, ...runOptions() };
    if (attached.length) body.attachments = attached.map((f) => f.id);
    const accepted = await api("POST", `/api/conversations/${conversationId}/messages/`, body);
    // Only now is the message safely stored: clear the box.
    input.value = "";
    files.clear();
    document.getElementById("empty-state").hidden = true;
    historyEl.append(userArticle({ id: accepted.message_id, content, attachments: attached }));
    const article = createRunArticle(accepted.run_id);
    historyEl.append(article);
    follow(accepted.run_id, article, accepted.status);
    jumpToLatest();
  } catch (error) {
    // Refused for one of its files (unreadable, or taken): that chip says why.
    const refusedFile = error.details && error.details.field === "attachments" && error.details.file_id;
    if (!(refusedFile && files.refuse(refusedFile, error.message))) showError(error.message);
  } finally {
    sending = false;
    updateSendButton();
    input.focus();
  }
}

async function stopRuns() {
  stopButton.disabled = true;
  const running = [...liveRuns.values()].filter((l) => !TERMINAL.has(l.state.status));
  const results = await Promise.allSettled(running.map((l) => api("POST", `/api/runs/${l.state.runId}/cancel/`)));
  const failed = results.find((r) => r.status === "rejected");
  if (failed) showError(failed.reason.message);
  // The run's own run.cancelled event updates the page.
}

// ---------------------------------------------------------------- start

form.addEventListener("submit", send);
input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    form.requestSubmit();
  }
});
stopButton.addEventListener("click", stopRuns);
// Approve / Deny on a tool card (run_render.js): the REST decision endpoint;
// the run's approval.decided event then redraws the card.
historyEl.addEventListener("tool-decision", async (event) => {
  const { runId, toolCallId, decision, reason, done } = event.detail;
  try {
    await api("POST", `/api/runs/${runId}/tool-calls/${encodeURIComponent(toolCallId)}/decision/`,
      { decision, reason });
  } catch (error) {
    showError(error.message);
    done();
  }
});
// Keyboard: Esc stops the running answer; Ctrl+Shift+O (Cmd+Shift+O on a
// Mac) starts a new conversation, as in other chat apps.
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && !stopButton.hidden && !event.defaultPrevented) {
    event.preventDefault();
    stopRuns();
  } else if ((event.ctrlKey || event.metaKey) && event.shiftKey && event.key.toLowerCase() === "o") {
    event.preventDefault();
    window.location.href = "/";
  }
});
[modelSelect, assistantSelect, allToolsBox, ...toolBoxes].forEach((c) => c.addEventListener("change", () => {
  syncToolBoxes();
  savePrefs();
}));
window.addEventListener("pagehide", () => {
  for (const live of liveRuns.values()) { live.stopped = true; live.socket?.close(); }
});

const currentConversation = () => conversationId;
setUpSearch(currentConversation);
setUpRename(currentConversation, showError);
setUpDelete(currentConversation, showError);
setUpDrawer();
restorePrefs();
forgetEndedRuns();
renderHistory();
resumeActiveRuns();
offerRegenerate();
updateStopButton();
input.focus();
// The page answers Enter from here on (the box is in the HTML before this
// module runs): browser tests wait for this mark before they type.
document.body.dataset.chatReady = "true";
