// The sidebar and title bar of the chat page: search conversations, rename
// and delete the open one, and the sidebar as a drawer on narrow screens.
// Everything goes through the REST API (GET ?q=, PATCH, DELETE).

import { api } from "./api.js";

const SEARCH_DELAY_MS = 250;

function conversationLink(conversation, currentId) {
  const link = document.createElement("a");
  link.href = `/c/${conversation.id}/`;
  link.className = `conversation${conversation.id === currentId ? " current" : ""}`;
  link.dataset.conversationId = conversation.id;
  const title = document.createElement("span");
  title.className = "title";
  title.textContent = conversation.title || "Untitled";
  link.append(title);
  return link;
}

// Typing in the search box lists the conversations whose title or messages
// contain the text; clearing it brings back the recent ones.
export function setUpSearch(currentId) {
  const box = document.getElementById("conversation-search");
  const list = document.getElementById("conversation-list");
  let timer = null;
  let asked = 0;
  box.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      const query = box.value.trim();
      const mine = ++asked;
      const params = new URLSearchParams({ source: "chat", limit: "50" });
      if (query) params.set("q", query);
      try {
        const found = await api("GET", `/api/conversations/?${params}`);
        if (mine !== asked) return; // a later search already answered
        list.replaceChildren(...found.results.map((c) => conversationLink(c, currentId())));
        if (!found.results.length) {
          const none = document.createElement("p");
          none.className = "muted";
          none.textContent = query ? "No conversation matches." : "No conversations yet.";
          list.append(none);
        }
      } catch (error) {
        list.replaceChildren(Object.assign(document.createElement("p"), { className: "error", textContent: error.message }));
      }
    }, SEARCH_DELAY_MS);
  });
}

// "Rename" turns the title into a field: Enter saves (PATCH), Esc cancels.
// ``currentId()`` is the open conversation's id (a new one gets it when its
// first message is sent).
export function setUpRename(currentId, onError) {
  const renameButton = document.getElementById("rename-conversation");
  const heading = document.getElementById("conversation-title");
  renameButton.addEventListener("click", () => {
    const field = document.createElement("input");
    field.id = "conversation-title-input";
    field.value = heading.textContent;
    field.maxLength = 200;
    field.setAttribute("aria-label", "Conversation title");
    heading.hidden = true;
    heading.after(field);
    field.focus();
    field.select();
    const done = () => { field.remove(); heading.hidden = false; };
    field.addEventListener("keydown", async (event) => {
      if (event.key === "Escape") { event.preventDefault(); event.stopPropagation(); done(); return; }
      if (event.key !== "Enter") return;
      event.preventDefault();
      try {
        const conversationId = currentId();
        const saved = await api("PATCH", `/api/conversations/${conversationId}/`, { title: field.value });
        const title = saved.title || "Untitled";
        heading.textContent = title;
        document.title = `${title} · ChatForge`;
        document.querySelectorAll(`.conversation[data-conversation-id="${conversationId}"] .title`)
          .forEach((node) => { node.textContent = title; });
        done();
      } catch (error) {
        onError(error.message);
      }
    });
  });
}

// "Delete" asks first; the server cancels the conversation's running answer.
export function setUpDelete(currentId, onError) {
  const deleteButton = document.getElementById("delete-conversation");
  deleteButton.addEventListener("click", async () => {
    if (!window.confirm("Delete this conversation and all its messages? A running answer is stopped.")) return;
    try {
      await api("DELETE", `/api/conversations/${currentId()}/`);
      window.location.href = "/";
    } catch (error) {
      onError(error.message);
    }
  });
}

// Below ~800 px the sidebar is a drawer opened by the "Conversations" button.
export function setUpDrawer() {
  const toggle = document.getElementById("sidebar-toggle");
  const sidebar = document.getElementById("conversation-sidebar");
  const setOpen = (open) => {
    document.body.classList.toggle("sidebar-open", open);
    toggle.setAttribute("aria-expanded", String(open));
  };
  toggle.addEventListener("click", () => setOpen(!document.body.classList.contains("sidebar-open")));
  sidebar.addEventListener("click", (event) => { if (event.target.closest("a")) setOpen(false); });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && document.body.classList.contains("sidebar-open")) setOpen(false);
  });
}

// Shown once the conversation exists (after its first message).
export function showConversationButtons() {
  for (const id of ["rename-conversation", "delete-conversation"]) document.getElementById(id).hidden = false;
}
