// What a reader can do with a message: see when it was sent, copy it, edit
// and resend a question of theirs, regenerate the last answer, and move
// between the versions of a message (‹ n / m ›).
//
// Editing and regenerating follow the API's tree (docs/api.md, "Versions"):
// nothing is deleted; the edited question, or the new answer, is a sibling
// of the one it replaces, and the page shows the branch through it. The
// page (chat.js) posts and redraws; this module only draws the controls and
// says what the reader chose.

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

// The ids of the files a message carries: an edit sends them again.
export function attachmentIds(message) {
  return (message.attachments || []).map((file) => file.id);
}

// ``edit(content, attachmentIds)`` posts the new version; it resolves once
// the server has accepted it (the page then draws it), or rejects with the
// server's message, shown in the edit box.
export function addUserMessageActions(article, message, edit) {
  const header = article.querySelector(".msg-header");
  const copy = addCopyButton(header, () => message.content);
  copy.classList.add("copy-message");
  header.append(button("Edit", "edit-message", () => startEditing(article, message, edit)));
}

// ``regenerate()`` asks for a new answer in this one's place (a new version).
export function addRegenerateButton(article, regenerate) {
  article.querySelector(".msg-header").append(
    button("Regenerate", "regenerate", async (event) => {
      const control = event.currentTarget;
      control.disabled = true;
      try {
        await regenerate();
      } catch (failure) {
        control.disabled = false;
        const target = article.querySelector(".run-outcome") || article;
        target.textContent = failure.message;
        target.hidden = false;
      }
    }),
  );
}

function startEditing(article, message, edit) {
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
  note.textContent = "Sending adds a new version of this message; the current one stays under ‹ ›.";
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
    try {
      await edit(area.value, attachmentIds(message));
    } catch (failure) {
      save.disabled = false;
      error.textContent = failure.message;
      error.hidden = false;
    }
  });
}

// ‹ n / m › on a message with versions (``ids``: its siblings in order,
// itself included; ``index``: which one this is). ``onSwitch(id)`` is
// called with the version chosen. Drawn again on every call, so a version
// that arrives (a regenerated answer) updates the count in place; with one
// version the control is removed.
export function showVersions(article, { ids, index, onSwitch }) {
  const header = article.querySelector(".msg-header");
  let group = header.querySelector(".versions");
  if (ids.length < 2) { group?.remove(); return; }
  if (!group) {
    group = document.createElement("span");
    group.className = "versions";
    group.setAttribute("role", "group");
    group.setAttribute("aria-label", "Versions");
    const previous = button("‹", "version-previous", () => choose(-1));
    previous.setAttribute("aria-label", "Previous version");
    const count = document.createElement("span");
    count.className = "version-count";
    const next = button("›", "version-next", () => choose(1));
    next.setAttribute("aria-label", "Next version");
    group.append(previous, count, next);
    const who = header.querySelector(".who");
    who.after(group);
  }
  group.versions = { ids, index, onSwitch };
  group.querySelector(".version-count").textContent = `${index + 1} / ${ids.length}`;
  group.querySelector(".version-count").title = `Version ${index + 1} of ${ids.length}`;
  syncVersionButtons(group);

  function choose(step) {
    const { ids: shown, index: at, onSwitch: go } = group.versions;
    const target = shown[at + step];
    if (target) go(target);
  }
}

// Whether the page may switch versions now (not while a run is active:
// the server refuses, and the live answer would be drawn away).
let switchingAllowed = true;

function syncVersionButtons(group) {
  const { ids, index } = group.versions;
  // An id not known yet (a regenerated answer still streaming) cannot be chosen.
  const known = (i) => Boolean(ids[i]) && ids[i] !== PENDING;
  group.querySelector(".version-previous").disabled = !switchingAllowed || index <= 0 || !known(index - 1);
  group.querySelector(".version-next").disabled = !switchingAllowed || index >= ids.length - 1 || !known(index + 1);
}

// The id a version has until the server has stored it.
export const PENDING = "pending";

export function allowVersionSwitching(root, allowed) {
  switchingAllowed = allowed;
  root.querySelectorAll(".versions").forEach((group) => { if (group.versions) syncVersionButtons(group); });
}

// "Delete this version" on a message with versions: after a confirmation,
// ``remove()`` deletes it (and what follows it on its branch).
export function addDeleteVersionButton(article, remove) {
  const header = article.querySelector(".msg-header");
  if (header.querySelector(".delete-version")) return;
  const control = button("Delete this version", "delete-version", async () => {
    if (!window.confirm("Delete this version and every message after it? This cannot be undone.")) return;
    control.disabled = true;
    try {
      await remove();
    } catch (failure) {
      control.disabled = false;
      const target = article.querySelector(".run-outcome") || article.querySelector(".round-text");
      window.alert(failure.message);
      if (target) target.hidden = false;
    }
  });
  control.setAttribute("aria-label", "Delete this version");
  header.append(control);
}
