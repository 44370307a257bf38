// What a reader can do with a message: see when it was sent, copy it, edit
// and resend a question of theirs, regenerate the last answer.
//
// Editing and regenerating follow the API's branch rule (docs/api.md,
// "Editing and regenerating"): the edited question and everything after it
// are replaced. Once the server has accepted, the page reloads: the history
// is then drawn from the server and the new run is resumed like any active
// run, so no second copy of the drawing and resuming logic is needed here.

import { api } from "./api.js";
import { addCopyButton } from "./markdown.js";

const TIME = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

function button(label, className, onClick) {
  const node = document.createElement("button");
  node.type = "button";
  node.className = `msg-action ${className}`;
  node.textContent = label;
  node.addEventListener("click", onClick);
  return node;
}

export function addTimestamp(article, createdAt) {
  if (!createdAt || article.querySelector(".msg-header time")) return;
  const time = document.createElement("time");
  time.dateTime = createdAt;
  time.textContent = TIME.format(new Date(createdAt));
  time.title = createdAt;
  article.querySelector(".msg-header").append(time);
}

// The ids of the files a message carries: an edit or a regeneration sends
// them again (the message it replaces gives them up: docs/files.md).
function attachmentIds(message) {
  return (message.attachments || []).map((file) => file.id);
}

// ``send(replaceFrom, content, attachments)`` posts the message; it resolves once accepted.
export function addUserMessageActions(article, message, send) {
  const header = article.querySelector(".msg-header");
  const copy = addCopyButton(header, () => message.content);
  copy.classList.add("copy-message");
  header.append(button("Edit", "edit-message", () => startEditing(article, message, send)));
}

export function addRegenerateButton(article, lastQuestion, send) {
  article.querySelector(".msg-header").append(
    button("Regenerate", "regenerate", async (event) => {
      event.target.disabled = true;
      await submit(article, () => send(lastQuestion.id, lastQuestion.content, attachmentIds(lastQuestion)), event.target);
    }),
  );
}

function startEditing(article, message, send) {
  if (article.querySelector(".edit-box")) return;
  const text = article.querySelector(".round-text");
  const box = document.createElement("form");
  box.className = "edit-box";
  const area = document.createElement("textarea");
  area.value = message.content;
  area.rows = Math.min(10, Math.max(2, message.content.split("\n").length));
  area.setAttribute("aria-label", "Edit your message");
  const note = document.createElement("p");
  note.className = "hint";
  note.textContent = "Sending replaces this message and everything after it.";
  const error = document.createElement("p");
  error.className = "error";
  error.hidden = true;
  const save = button("Send", "primary save-edit", () => {});
  save.type = "submit";
  const cancel = button("Cancel", "cancel-edit", () => stopEditing());
  box.append(area, note, error, save, cancel);
  text.hidden = true;
  text.after(box);
  area.focus();

  function stopEditing() { box.remove(); text.hidden = false; }
  area.addEventListener("keydown", (event) => {
    if (event.key === "Escape") { event.stopPropagation(); stopEditing(); }
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) { event.preventDefault(); box.requestSubmit(); }
  });
  box.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!area.value.trim() && !attachmentIds(message).length) {
      error.textContent = "Type a message first."; error.hidden = false; return;
    }
    save.disabled = true;
    await submit(article, () => send(message.id, area.value, attachmentIds(message)), save, error);
  });
}

async function submit(article, post, control, errorEl = null) {
  try {
    await post();
    window.location.reload();
  } catch (failure) {
    control.disabled = false;
    const target = errorEl || article.querySelector(".run-outcome") || article;
    target.textContent = failure.message;
    target.hidden = false;
  }
}

export function postReplacing(conversationId, options) {
  return (replaceFrom, content, attachments = []) => api("POST", `/api/conversations/${conversationId}/messages/`,
    { ...options(), content, replace_from: replaceFrom, on_active: "reject",
      ...(attachments.length ? { attachments } : {}) });
}
