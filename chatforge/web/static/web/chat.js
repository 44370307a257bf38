// The chat page: history, sending, live runs over the run websocket, stop,
// and resuming after a dropped connection or a page reload.
//
// Each live run keeps its state (run_state.js) in sessionStorage after every
// event. A reload draws that state at once and reconnects with
// ``?after=<last seq>``, so the server sends only what the page has not
// seen; without a saved state it replays the run from its first event.

import { api, pageData } from "./api.js";
import { ComposerFiles, storedFilesList } from "./attachments.js";
import { applyEvent, applyRunInfo, newRunState, stateFromMessage, TERMINAL } from "./run_state.js";
import { setUpConversationState, setUpExport, setUpMenu } from "./conversation_menu.js";
import {
  ConversationList, setUpArchivedToggle, setUpDelete, setUpDrawer, setUpRename, setUpSearch, setUpSearchShortcut,
  showConversationButtons,
} from "./conversations.js";
import {
  addDeleteVersionButton, addRegenerateButton, addTimestamp, addUserMessageActions, allowVersionSwitching, PENDING,
  showVersions,
} from "./message_actions.js";
import { createRunArticle, renderRun } from "./run_render.js";
import { setUpShareDialog } from "./share_dialog.js";

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
  if (prefs.model !== undefined && [...modelSelect.options].some((o) => o.value === prefs.model && !o.disabled)) modelSelect.value = prefs.model;
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

// The message each article shows ({id, content, parent_id, sibling_ids, …}):
// what Edit, Regenerate and the versions control work from.
const shownMessages = new WeakMap();

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
  if (message.id && conversationId) {
    addUserMessageActions(article, message, (content, attachments) => editMessage(article, message, content, attachments));
  }
  shownMessages.set(article, message);
  drawVersions(article, message);
  return article;
}

function storedAssistantArticle(message) {
  const state = stateFromMessage(message);
  state.error = message.run_error || "";
  const article = createRunArticle(message.run);
  article.dataset.messageId = message.id;
  renderRun(article, state);
  addTimestamp(article, message.created_at);
  shownMessages.set(article, message);
  drawVersions(article, message);
  return article;
}

// ---------------------------------------------------------------- versions

// A message's versions (docs/web.md, "Versions"): the ids of the messages
// with its parent and role, itself included (``sibling_ids``).
function versionsOf(message) {
  const ids = message.sibling_ids && message.sibling_ids.length ? message.sibling_ids : [message.id];
  return ids.filter(Boolean);
}

function drawVersions(article, message) {
  const ids = versionsOf(message);
  const index = Math.max(0, ids.indexOf(message.id || PENDING));
  showVersions(article, { ids, index, onSwitch: (id) => switchVersion(article, id, ids.indexOf(id) < index) });
  if (ids.length > 1 && message.id && conversationId) addDeleteVersionButton(article, () => deleteVersion(message));
}

function runActive() {
  return [...liveRuns.values()].some((live) => !TERMINAL.has(live.state.status));
}

// The article and everything after it leave the page: the branch from
// there on is being replaced by another version.
function removeFrom(article) {
  let node = article;
  while (node) {
    const next = node.nextElementSibling;
    if (node.tagName === "ARTICLE") node.remove();
    node = next;
  }
  for (const [runId, live] of liveRuns) if (!live.article.isConnected) liveRuns.delete(runId);
}

// The history drawn again from the server's current branch (``messages``,
// the shape of GET …/messages/), e.g. after switching versions.
function drawMessages(messages) {
  historyEl.querySelectorAll(":scope > article, :scope > .older-note").forEach((node) => node.remove());
  for (const [runId, live] of liveRuns) if (TERMINAL.has(live.state.status)) liveRuns.delete(runId);
  for (const message of messages) {
    historyEl.append(message.role === "user" ? userArticle(message) : storedAssistantArticle(message));
  }
  document.getElementById("empty-state").hidden = messages.length > 0;
  offerRegenerate();
}

// ‹ or ›: the server makes that version's branch the current one (it is
// kept there, so a reload shows it too) and answers with the branch. The
// chosen message stays where the reader's eyes were, and keeps the focus.
async function switchVersion(article, messageId, backwards) {
  if (runActive()) return;
  showError("");
  const top = article.getBoundingClientRect().top;
  allowVersionSwitching(historyEl, false);
  try {
    const branch = await api("POST", `/api/conversations/${conversationId}/branch/`, { message_id: messageId });
    allowVersionSwitching(historyEl, !runActive());
    drawMessages(branch.messages);
    const shown = historyEl.querySelector(`:scope > article[data-message-id="${CSS.escape(messageId)}"]`);
    if (shown) {
      historyEl.scrollTop += shown.getBoundingClientRect().top - top;
      const wanted = shown.querySelector(backwards ? ".version-previous" : ".version-next");
      (wanted && !wanted.disabled ? wanted : shown.querySelector(".versions button:not(:disabled)"))?.focus();
    }
    following = atEnd();
    jumpButton.hidden = following;
  } catch (error) {
    showError(error.message);
  } finally {
    allowVersionSwitching(historyEl, !runActive());
  }
}

// "Delete this version": that message and everything under it go; the page
// is drawn again from the server (whose current branch then moves to
// another version).
async function deleteVersion(message) {
  try {
    await api("DELETE", `/api/messages/${message.id}/`);
  } catch (error) {
    showError(error.message);
    return;
  }
  window.location.reload();
}

// The message before ``article`` on the page (its parent on the branch).
function previousMessageId(article) {
  const before = article.previousElementSibling;
  return before && before.tagName === "ARTICLE" ? before.dataset.messageId || null : null;
}

// Edit: the new text goes in as a sibling of the question (same parent),
// and the page shows its branch: the new question, then its answer as it
// streams. Refused while a run is active (the server's message is shown).
async function editMessage(article, message, content, attachments) {
  const parentId = message.parent_id !== undefined ? message.parent_id : previousMessageId(article);
  const body = { ...runOptions(), on_active: "reject", content, parent_id: parentId };
  if (attachments.length) body.attachments = attachments;
  const accepted = await api("POST", `/api/conversations/${conversationId}/messages/`, body);
  const versions = [...versionsOf(message), accepted.message_id];
  removeFrom(article);
  historyEl.append(userArticle({
    id: accepted.message_id, content, attachments: message.attachments || [], parent_id: parentId,
    sibling_ids: versions, created_at: new Date().toISOString(),
  }));
  startRun(accepted, [PENDING]);
}

// Regenerate: a new answer to the same question, a sibling of this one;
// it shows as the last version while it streams in.
async function regenerateAnswer(answer, question) {
  const target = answer.dataset.messageId || question.id;
  let accepted;
  try {
    accepted = await api("POST", `/api/messages/${target}/regenerate/`, runOptions());
  } catch (error) {
    if (!answer.isConnected) showError(error.message);  // drawn away meanwhile: say it below
    throw error;
  }
  const shown = shownMessages.get(answer);
  const versions = shown ? versionsOf(shown) : answer.dataset.messageId ? [answer.dataset.messageId] : [];
  removeFrom(answer);
  startRun(accepted, [...versions, PENDING]);
}

// Versions of a live answer: the ids so far, PENDING for its own until the
// run has stored it.
function drawLiveVersions(live) {
  const ids = live.versions.map((id) => (id === PENDING && live.state.messageId ? live.state.messageId : id));
  const message = { id: live.state.messageId || "", sibling_ids: ids };
  drawVersions(live.article, message);
  shownMessages.set(live.article, message);
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
  const question = shownMessages.get(articles.reverse().find((a) => a.classList.contains("user")));
  if (question && question.id) addRegenerateButton(answer, () => regenerateAnswer(answer, question));
}

// A live run has ended: its reply gets what a reloaded page draws for a
// stored answer (its id, its time, and Regenerate if it is the last).
function finishRun(live) {
  const { article, state } = live;
  if (state.messageId) article.dataset.messageId = state.messageId;
  addTimestamp(article, state.endedAt || new Date().toISOString());
  drawLiveVersions(live);
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
    note.className = "muted center older-note";
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
  const running = runActive();
  stopButton.hidden = !running;
  stopButton.disabled = !running;
  allowVersionSwitching(historyEl, !running);
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

// ``versions``: the answer's versions so far (drawLiveVersions); ``model``:
// the model the page asked for, shown until the run says which answers.
function follow(runId, article, status = "queued", { versions = [PENDING], model = "" } = {}) {
  const state = savedState(runId) || newRunState(runId, status);
  const live = {
    state, article, socket: null, attempts: 0, connection: "connecting", dirty: true, stopped: false, finished: false,
    versions,
  };
  liveRuns.set(runId, live);
  offerRegenerate();  // nothing is regenerated while a run is live
  if (!state.model) state.model = model;
  renderRun(article, state);
  drawLiveVersions(live);
  updateStopButton();
  connect(live);
  learnAnswerer(live);
  scheduleRender();
  return live;
}

// The model (an assistant profile or the server may choose it) and the
// assistant profile of a live run: no event carries them, the run does.
async function learnAnswerer(live) {
  try {
    applyRunInfo(live.state, await api("GET", `/api/runs/${live.state.runId}/`));
  } catch {
    return;  // the header keeps what the page asked for; the stored answer says it once done
  }
  live.dirty = true;
  scheduleRender();
}

// A new run for a message the server accepted: its answer goes at the end.
function startRun(accepted, versions) {
  const article = createRunArticle(accepted.run_id);
  historyEl.append(article);
  follow(accepted.run_id, article, accepted.status, { versions, model: modelSelect.value });
  jumpToLatest();
}

function resumeActiveRuns() {
  for (const run of page.active_runs) {
    const article = createRunArticle(run.id);
    const userMessage = historyEl.querySelector(`article.user[data-message-id="${run.user_message_id}"]`);
    let versions = [PENDING];
    // A regenerated answer still streaming: the branch may show the answer it
    // replaces after the question; that one becomes an earlier version.
    const older = userMessage && userMessage.nextElementSibling;
    if (older && older.matches("article.assistant") && older.dataset.runId !== run.id && shownMessages.get(older)) {
      versions = [...versionsOf(shownMessages.get(older)), PENDING];
      removeFrom(older);
    }
    if (userMessage) userMessage.after(article);
    else historyEl.append(article);
    follow(run.id, article, run.status, { versions });
  }
}

// ---------------------------------------------------------------- sending

function showError(text) {
  errorEl.textContent = text;
  errorEl.hidden = !text;
}

function addToSidebar(conversation) {
  conversationList.add(conversation);
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
    startRun(accepted, [PENDING]);
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
// The sidebar's list and the title bar's menu (conversations.js, conversation_menu.js, share_dialog.js).
let conversationChanged = () => {};
const conversationList = new ConversationList({ currentId: currentConversation, onChange: (c) => conversationChanged(c) });
conversationChanged = setUpConversationState({ currentId: currentConversation, conversation: page.conversation,
                                               list: conversationList, onError: showError });
setUpSearch(conversationList);
setUpArchivedToggle(conversationList);
setUpSearchShortcut(setUpDrawer());
setUpMenu(document.getElementById("conversation-menu-button"), document.getElementById("conversation-menu"));
setUpRename(currentConversation, showError, conversationList);
setUpDelete(currentConversation, showError);
setUpExport(currentConversation);
setUpShareDialog(currentConversation);
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
